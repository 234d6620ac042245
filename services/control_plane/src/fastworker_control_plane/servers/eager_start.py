"""Running a coroutine's first step at once, and making a task of it only if it waits.

Most requests are answered without waiting for anything (a submit, a status, a fetch with
work ready): run as a task, each would cost a task, a future and an extra turn of the
event loop before its reply is sent. ``start_eagerly`` runs the first step in the
caller; a coroutine that finishes there gives its value at once. One that waits goes on
in a task, from where it stopped, as if it had been a task from the start: the task
waits on what the coroutine waits on, and sends, throws and cancellation go through to
it. (Python 3.12's ``eager_start`` does this; the project supports 3.11.)

The first step runs outside any task: code that needs ``asyncio.current_task()`` there
(``asyncio.timeout``) must not be started this way. A request's handlers reach no such
code before their first wait.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(
    coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop
) -> tuple[bool, T | asyncio.Task[T]]:
    """``(True, value)`` if ``coro`` finished in its first step, else ``(False, task)``
    with the task that runs the rest. An exception from the first step propagates.

    The coroutine runs in a context of its own, as a task's would: what it sets in a
    context variable is not seen by the caller, and the task goes on in that context."""
    context = contextvars.copy_context()
    try:
        waiting_on = context.run(coro.send, None)
    except StopIteration as finished:
        return True, finished.value
    return False, loop.create_task(_rest(coro, waiting_on), context=context)


async def _rest(coro: Coroutine[Any, Any, T], waiting_on: Any) -> T:
    value: T = await _Resumed(coro, waiting_on)
    return value


class _Resumed:
    """Awaits what a started coroutine waits on, then drives it on to its end."""

    __slots__ = ("_coro", "_waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self._coro = coro
        self._waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting_on = self._coro, self._waiting_on
        while True:
            try:
                sent = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as error:  # thrown in by the task: cancellation, mostly
                try:
                    waiting_on = coro.throw(error)
                except StopIteration as finished:
                    return finished.value
            else:
                try:
                    waiting_on = coro.send(sent)
                except StopIteration as finished:
                    return finished.value
