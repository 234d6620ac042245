# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.test_backpressure import *  # noqa: F403
