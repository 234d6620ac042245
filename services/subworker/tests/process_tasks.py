"""Process tasks for the process-pool unit tests: a child imports this module by name, so
its directory is put on the child's ``sys.path`` (``Spec.sys_path``). The tasks go to a
registry of their own, so importing the module registers nothing globally."""

from __future__ import annotations

import os

from fastworker import TaskRegistry, task

registry = TaskRegistry()


@task(pool="process", registry=registry)
def pid_of() -> int:
    """The pid of the process that ran it."""
    return os.getpid()


@task(pool="process", registry=registry)
def double(x: int) -> int:
    return 2 * x


def not_a_task() -> None:
    return None
