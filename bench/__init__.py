"""Benchmarks: each module is a script (`uv run bench/NAME.py`); results in README.md."""
