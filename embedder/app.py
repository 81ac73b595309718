# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "fastapi==0.163.2",
#     "huggingface-hub==2.4.0",
#     "numpy==2.4.6",
#     "onnx==1.23.2",
#     "onnxruntime==1.32.0",
#     "pydantic==2.14.4",
#     "pydantic-settings==2.16.3",
#     "safetensors==0.8.0",
#     "tokenizers==0.23.3",
#     "torch==2.13.0",
#     "transformers==5.23.0",
#     "uvicorn==0.55.0",
# ]
#
# # `uv run embedder/app.py` on Linux takes PyTorch's CPU-only build from PyTorch's own index
# # (the image's torch too), not PyPI's Linux build with its CUDA wheels (several GB). For an
# # NVIDIA GPU: `uv run --no-sources embedder/app.py`. (`uv pip install -r` reads no sources.)
# [tool.uv.sources]
# torch = { index = "pytorch-cpu", marker = "sys_platform == 'linux'" }
#
# [[tool.uv.index]]
# name = "pytorch-cpu"
# url = "https://download.pytorch.org/whl/cpu"
# explicit = true
# ///
"""The embedding service's entry: `uv run embedder/app.py` (the container runs
`python embedder/app.py`). The service itself is the package embed_server (api.py); this file's
header pins its stack for `uv run` and for the image (`uv pip install -r embedder/app.py`)."""

from embed_server.api import main

if __name__ == "__main__":
    raise SystemExit(main())
