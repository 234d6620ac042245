"""Running one assigned task: async tasks awaited, sync tasks on a thread, never more than
``concurrency`` at once, every outcome (value or exception) turned into an ``Outcome``.

Only names in the registry run; an unknown name is a failure, never an import.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from fastworker import TaskRegistry
from fastworker_protocol import Assignment, Outcome, TaskError


class Executor:
    def __init__(
        self, registry: TaskRegistry, concurrency: int, on_start: Callable[[str], None]
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._registry = registry
        self._semaphore = asyncio.Semaphore(concurrency)
        self._threads = ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="fastworker-task"
        )
        self._on_start = on_start

    async def execute(self, assignment: Assignment) -> Outcome:
        async with self._semaphore:
            self._on_start(assignment.id)
            started = time.time()
            try:
                value = _portable(await self._call(assignment))
            except asyncio.CancelledError:
                raise
            except _Unportable as exc:
                return _failure(
                    assignment, started, exc.__cause__ or exc, reason="unserializable_result"
                )
            except Exception as exc:
                return _failure(assignment, started, exc)
            return Outcome(
                task_id=assignment.id,
                ok=True,
                result=value,
                started_at=started,
                finished_at=time.time(),
            )

    async def _call(self, assignment: Assignment) -> Any:
        task = self._registry.get(assignment.name)
        if task is None:
            raise LookupError(f"this subworker has no task named {assignment.name!r}")
        if task.is_async:
            return await task.fn(*assignment.args, **assignment.kwargs)
        call = functools.partial(task.fn, *assignment.args, **assignment.kwargs)
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._threads, context.run, call)

    def shutdown(self) -> None:
        """Stop the thread pool without waiting for abandoned sync tasks."""
        self._threads.shutdown(wait=False, cancel_futures=True)


class _Unportable(Exception):
    pass


def _portable(value: Any) -> Any:
    """The value as plain msgpack types (bytes stay bytes; datetimes, UUIDs, dataclasses
    and enums become their portable forms), or ``_Unportable`` if it has none."""
    try:
        return msgspec.to_builtins(value, builtin_types=(bytes, bytearray, memoryview))
    except (TypeError, ValueError, OverflowError) as exc:
        raise _Unportable(f"result of type {type(value).__name__} cannot be sent") from exc


def _failure(
    assignment: Assignment, started: float, exc: BaseException, reason: str = "exception"
) -> Outcome:
    error = TaskError(
        type=type(exc).__name__,
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
        reason=reason,
    )
    return Outcome(
        task_id=assignment.id, ok=False, error=error, started_at=started, finished_at=time.time()
    )
