"""Importing the user's task modules (``--task-modules a.b c``): the only code a subworker
runs is what these modules register with ``@task``.

A worker that cannot load its tasks must say why in a few lines, not a traceback, and all
at once: every schedule problem of every module (``fastworker.schedule_checks``) is
gathered before the failure is reported, so one start shows everything to fix.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable

from fastworker.schedule_checks import collecting


class TaskModuleError(ImportError):
    """The task modules cannot be loaded; ``problems`` has one line for each reason."""

    def __init__(self, problems: list[str]) -> None:
        many = ["cannot load the task modules:", *(f"  {line}" for line in problems)]
        super().__init__(problems[0] if len(problems) == 1 else "\n".join(many))
        self.problems = problems


def load_task_modules(modules: Iterable[str]) -> None:
    """Import each module, with the working directory importable (as ``python -m`` does).
    Raises ``TaskModuleError`` listing every schedule problem of the modules imported,
    then the error that stopped the imports, if one did."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    with collecting() as problems:
        for name in modules:
            failure = _import(name)
            if failure:
                problems += failure
                break
    if problems:
        raise TaskModuleError(list(problems))


def _import(name: str) -> list[str]:
    """Import one module; what went wrong, a line each, if it failed in a way its
    message alone explains (a module not found, a ``@task`` declaration refused)."""
    try:
        importlib.import_module(name)
    except ImportError as exc:
        return [f"cannot import task module {name!r}: {exc}"]
    except ValueError as exc:  # what @task raises for a declaration it refuses
        return [f"task module {name!r}: {line}" for line in str(exc).splitlines() or [""]]
    return []
