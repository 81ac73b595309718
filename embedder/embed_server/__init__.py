"""The embedding service: the OpenAI-style API over one loaded model."""
