# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.it_shop import *  # noqa: F403
