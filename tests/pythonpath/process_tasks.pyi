# The tests' bare import of this name (pytest's pythonpath), for mypy: see pyproject.toml
from services.subworker.tests.process_tasks import *  # noqa: F403
