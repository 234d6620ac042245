"""The pytest plugin (in progress)."""
