# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from tests.helm.chart_render import *  # noqa: F403
