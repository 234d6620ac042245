"""Testing code that uses FastWorker (in progress)."""

__all__: list[str] = []
