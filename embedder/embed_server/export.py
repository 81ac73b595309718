"""Export models for EMBED_BACKEND=onnx (`python embedder/export_onnx.py MODEL [MODEL ...]`).

Each MODEL (a folder, or a hub id already in the Hugging Face cache) is exported to fp32 and int8
ONNX under EMBED_ONNX_DIR (or --onnx-dir), where the service looks for it. The image runs this in
its build stage; an empty MODEL argument is skipped (an unset EMBED_CODE_MODEL build argument).
"""

from __future__ import annotations

import argparse
import logging
import sys

from embed_server.config import EmbedderSettings
from embed_server.errors import ModelLoadError
from embed_server.model import resolve_model
from embed_server.onnx_backend import export, onnx_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="model folders or cached hub ids")
    parser.add_argument("--onnx-dir", help="default: EMBED_ONNX_DIR")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    root = args.onnx_dir or EmbedderSettings().EMBED_ONNX_DIR
    for name in args.models:
        if not name:
            continue
        try:
            folder = resolve_model(name)
        except ModelLoadError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        out = export(folder, onnx_dir(root, folder))
        print(f"{name}: {out['fp32']} {out['int8']}")
    return 0
