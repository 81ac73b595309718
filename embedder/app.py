# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "fastapi==0.163.2",
#     "numpy==2.4.6",
#     "pydantic-settings==2.16.3",
#     "tokenizers==0.23.3",
#     "torch==2.13.0",
#     "transformers==5.23.0",
#     "uvicorn==0.54.0",
# ]
# ///
