# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.ha_stream import *  # noqa: F403
