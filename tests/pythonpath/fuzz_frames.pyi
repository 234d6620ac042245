# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from services.protocol.tests.fuzz_frames import *  # noqa: F403
