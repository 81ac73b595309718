"""Benchmarks: each module is a script (`uv run bench/NAME.py`) of the checkout, not installed;
results in README.md."""
