# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.helm.fake_cli import *  # noqa: F403
