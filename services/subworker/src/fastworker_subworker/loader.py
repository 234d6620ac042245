"""Importing the user's task modules (``--task-modules a.b c``): the only code a subworker
runs is what these modules register with ``@task``."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable


class TaskModuleError(ImportError):
    pass


def load_task_modules(modules: Iterable[str]) -> None:
    """Import each module, with the working directory importable (as ``python -m`` does)."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise TaskModuleError(f"cannot import task module {name!r}: {exc}") from exc
