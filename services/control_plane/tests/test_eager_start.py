"""``start_eagerly``: a coroutine that finishes in its first step gives its value with no
task; one that waits goes on in a task exactly as if it had been one from the start."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from fastworker_control_plane.servers.eager_start import start_eagerly


async def test_a_coroutine_that_never_waits_gives_its_value_with_no_task() -> None:
    async def ready() -> str:
        return "now"

    assert start_eagerly(ready(), asyncio.get_running_loop()) == (True, "now")


async def test_one_that_waits_finishes_in_a_task_with_what_it_was_sent() -> None:
    # Given a coroutine that waits on a future twice
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    steps: list[str] = []

    async def waits() -> str:
        steps.append("started")
        a: str = await first
        b: str = await second
        return a + b

    # When it is started eagerly
    done, task = start_eagerly(waits(), loop)
    # Then its first step ran in the caller, and the rest is a task
    assert not done
    assert isinstance(task, asyncio.Task)
    assert steps == ["started"]
    first.set_result("a")
    second.set_result("b")
    assert await asyncio.wait_for(task, 5) == "ab"


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    loop = asyncio.get_running_loop()
    cleaned: list[str] = []

    async def held() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append("finally")

    done, task = start_eagerly(held(), loop)
    assert not done
    assert isinstance(task, asyncio.Task)
    await asyncio.sleep(0)  # the task takes over the wait
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["finally"]


async def test_an_error_after_a_wait_is_the_tasks_and_one_before_is_the_callers() -> None:
    loop = asyncio.get_running_loop()

    async def fails_at_once() -> None:
        raise ValueError("at once")

    with pytest.raises(ValueError, match="at once"):
        start_eagerly(fails_at_once(), loop)

    async def fails_later() -> None:
        await asyncio.sleep(0)
        raise ValueError("later")

    done, task = start_eagerly(fails_later(), loop)
    assert not done
    assert isinstance(task, asyncio.Task)
    with pytest.raises(ValueError, match="later"):
        await task


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


async def test_each_coroutine_has_a_context_of_its_own_from_its_first_step_to_its_end() -> None:
    loop = asyncio.get_running_loop()
    go_on = loop.create_future()
    seen: list[str] = []

    async def sets_then_waits() -> None:
        REQUEST.set("first")
        await go_on
        seen.append(REQUEST.get())

    done, task = start_eagerly(sets_then_waits(), loop)
    assert not done
    assert isinstance(task, asyncio.Task)
    # The caller does not see what the coroutine set, and the task goes on seeing it
    assert REQUEST.get() == "none"
    go_on.set_result(None)
    await task
    assert seen == ["first"]
