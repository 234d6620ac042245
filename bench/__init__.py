"""FastWorker's benchmark: ``uv run python -m bench`` (see bench/README.md)."""
