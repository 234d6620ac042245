# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.fuzz_port_frames import *  # noqa: F403
