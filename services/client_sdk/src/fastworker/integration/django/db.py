"""``@db_task``: ``@task`` for functions that use the ORM, with Django's connection
hygiene around each run on a worker.

Django opens one connection per thread and counts on the request cycle to close it
(``close_old_connections`` on each request's start and end). A subworker's task threads
have no request cycle: without help, each keeps its connection forever, past
``CONN_MAX_AGE`` and past a database restart that broke it, and the next task on that
thread fails. ``@db_task`` does what a request does: ``close_old_connections()`` before
and after the function, on the thread that runs it (the name and the idea are Huey's).

It acts only in a worker process (see ``_process``), and never inside an atomic block:
in a web process, a test or a direct call the caller owns the connection, and closing a
connection inside a transaction would break it. An ``async def`` is registered as it is
(the ORM's async calls manage their own threads).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, overload

from django.db import close_old_connections, connections  # type: ignore[import-untyped]

from fastworker._task import Task, task
from fastworker.integration.django._process import is_worker

__all__ = ["db_task"]

P = ParamSpec("P")
R = TypeVar("R")


@overload
def db_task(fn: Callable[P, R], /) -> Task[P, R]: ...


@overload
def db_task(**options: Any) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def db_task(
    fn: Callable[P, R] | None = None, /, **options: Any
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """``@task`` (with the same options), plus fresh database connections around each
    run on a worker."""

    def register(f: Callable[P, R]) -> Task[P, R]:
        registered: Task[P, R] = task(**options)(fresh_connections(f))
        return registered

    return register(fn) if fn is not None else register


def fresh_connections(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with ``close_old_connections()`` before and after it, on a worker."""
    is_async = inspect.iscoroutinefunction(fn)  # (a bool: no narrowing of fn's type)
    if is_async:
        return fn

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not is_worker() or _in_atomic_block():
            return fn(*args, **kwargs)
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return run


def _in_atomic_block() -> bool:
    return any(c.in_atomic_block for c in connections.all(initialized_only=True))
