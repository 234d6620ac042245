# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from services.control_plane.tests.recording_board import *  # noqa: F403
