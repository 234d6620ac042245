# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.http_helpers import *  # noqa: F403
