# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.test_ha_partitions import *  # noqa: F403
