# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from services.control_plane.tests.view_world import *  # noqa: F403
