"""Retries and delayed tasks, on real processes."""

from __future__ import annotations

import time
from pathlib import Path

from harness import Cluster

from fastworker import Client, TaskStatus


async def test_a_task_failing_twice_then_succeeding_ends_success_after_3_attempts(
    client: Client, tmp_path: Path
) -> None:
    result = await client.submit_task("flaky", args=(str(tmp_path / "n"), 3), timeout=20)
    assert result.status == TaskStatus.SUCCESS
    assert result.result == 3
    assert result.attempts == 3
    assert [e.message for e in result.attempt_errors] == ["failure number 1", "failure number 2"]


async def test_a_task_out_of_retries_fails_with_every_attempt_summarized(
    client: Client, tmp_path: Path
) -> None:
    result = await client.submit_task("flaky", args=(str(tmp_path / "n"), 99), timeout=20)
    assert result.status == TaskStatus.FAILURE
    assert result.attempts == 4
    assert len(result.attempt_errors) == 4
    assert result.error is not None
    assert "after 4 attempts" in result.error.message
    assert "attempt 1: RuntimeError: failure number 1" in result.error.message


async def test_a_submission_can_turn_retries_off_and_retry_on_filters_by_type(
    client: Client, tmp_path: Path
) -> None:
    no_retry = await client.apply_async("flaky", (str(tmp_path / "a"), 3), max_retries=0)
    other_error = await client.delay("picky", str(tmp_path / "b"))
    first, second = await client.wait_results([no_retry, other_error], timeout=20)
    assert (first.status, first.attempts) == (TaskStatus.FAILURE, 1)
    assert (second.status, second.attempts) == (TaskStatus.FAILURE, 1)
    assert (tmp_path / "b").read_text() == "1"


async def test_retry_on_a_base_class_retries_its_subclasses_on_a_subworker(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a subworker running a task with retry_on=(ConnectionError,), the README's example
    cluster.control_plane(local_concurrency=0)
    cluster.subworker(concurrency=1)
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        # When it fails twice with ConnectionRefusedError, a subclass, then succeeds
        result = await client.submit_task("refused", args=(str(tmp_path / "n"), 3), timeout=20)
    # Then both failures were retried
    assert (result.status, result.result, result.attempts) == (TaskStatus.SUCCESS, 3, 3)
    assert [e.type for e in result.attempt_errors] == ["ConnectionRefusedError"] * 2


async def test_a_countdown_task_starts_between_1_and_2_seconds_after_submission(
    client: Client,
) -> None:
    # The due time is the client's clock + 1 s, read before the control plane stamps
    # submitted_at: the start is due 1 s after `asked`, not after submitted_at.
    asked = time.time()
    task_id = await client.delay("nap", 0, countdown=1)
    waiting = await client.get_task_result(task_id)
    assert waiting is not None
    assert waiting.status == TaskStatus.SCHEDULED
    result = await client.wait_result(task_id, timeout=10)
    assert result.started_at is not None
    assert result.submitted_at is not None
    assert result.started_at >= asked + 1.0
    assert result.started_at - result.submitted_at <= 2.0


async def test_a_delayed_task_can_be_cancelled_before_it_runs(client: Client) -> None:
    task_id = await client.delay("add", 1, 2, countdown=30)
    assert await client.cancel_task(task_id) is True
    result = await client.get_task_result(task_id)
    assert result is not None
    assert (result.status, result.attempts) == (TaskStatus.CANCELLED, 0)
