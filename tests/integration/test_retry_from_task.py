"""Retrying from inside a task (``fastworker.retry``, ``raise Retry``) with a real control
plane: the delay asked for, the reason shown while the task waits, its ``max_retries``."""

from __future__ import annotations

import time

import it_tasks
import pytest
from harness import wait_until

from fastworker import Client, TaskFailed, TaskStatus


async def test_a_task_waiting_for_its_retry_shows_retrying_its_reason_and_when(
    client: Client,
) -> None:
    asked = time.time()
    handle = await client.delay(it_tasks.waits_to_retry, "the bank is closed", 60)

    async def retrying() -> bool:
        return await handle.status() is TaskStatus.RETRYING

    await wait_until(retrying, what="the task to wait for its retry")
    info = await handle.info()
    [error] = info.attempt_errors
    assert (error.type, error.message, error.reason) == ("Retry", "the bank is closed", "retry")
    assert info.eta is not None
    assert asked + 59 < info.eta < time.time() + 61  # the countdown it asked for
    assert await handle.cancel()


async def test_a_task_asking_again_past_max_retries_fails_with_its_reason(
    client: Client,
) -> None:
    handle = await client.delay(it_tasks.waits_to_retry, "still closed", 0)
    with pytest.raises(TaskFailed) as failed:
        await handle.get(timeout=20)
    assert failed.value.remote_type == "Retry"
    assert failed.value.reason == "retry"
    assert failed.value.remote_message.startswith("still closed (after 3 attempts")


async def test_max_retries_given_at_submission_bounds_asked_retries(client: Client) -> None:
    handle = await client.apply_async(it_tasks.waits_to_retry, ("no", 0), max_retries=0)
    result = await handle.result(timeout=20)
    assert (result.status, result.attempts) == (TaskStatus.FAILURE, 1)
