"""Export models for EMBED_BACKEND=onnx: `python embedder/export_onnx.py MODEL [MODEL ...]` (the
image's build stage runs it). The export itself is embed_server.export."""

from embed_server.export import main

if __name__ == "__main__":
    raise SystemExit(main())
