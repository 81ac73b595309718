"""Vectors: the embedder's HTTP client, its cache, keyword (BM25) vectors."""
