# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.integration.etcd_server import *  # noqa: F403
