"""Dead letters in real processes: a task that fails for good is kept with its traceback
and arguments, a retry runs it again as a new task linked to it, the store survives a
restart on its journal, and a bulk retry of 1,000 runs every one.

The dead-letter operations are sent as raw protocol messages to the results port (the
SDK's methods for them live elsewhere); tasks are submitted and awaited with the SDK."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypeVar

import pynng
from harness import Cluster, Proc, wait_until

from fastworker import TaskStatus
from fastworker_protocol import (
    Codec,
    FailedFilter,
    FailedList,
    FailedPurged,
    FailedRetried,
    Get,
    ListFailed,
    Message,
    PurgeFailed,
    Results,
    RetryFailed,
    TaskResult,
)

M = TypeVar("M", bound=Message)


async def ask(cluster: Cluster, message: Message, reply_type: type[M]) -> M:
    """One request to the results port (base + 4), its reply checked for its type."""
    address = f"tcp://127.0.0.1:{cluster.base_port + 4}"
    with pynng.Req0(dial=address, recv_timeout=20_000, send_timeout=20_000) as req:
        await req.asend(Codec().encode(message))
        reply = Codec().decode(await req.arecv())
    assert isinstance(reply, reply_type), reply
    return reply


async def listed(cluster: Cluster, **selection: Any) -> FailedList:
    message = ListFailed(filter=FailedFilter(**selection), limit=10_000)
    return await ask(cluster, message, FailedList)


async def result_of(cluster: Cluster, task_id: str) -> TaskResult | None:
    return (await ask(cluster, Get(task_ids=[task_id]), Results)).results[0]


async def test_a_task_failing_after_its_retries_is_kept_and_a_retry_runs_it_again_linked(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a task that fails its first four attempts (one run and three retries)
    cluster.control_plane()
    counter = str(tmp_path / "flaky.count")
    async with cluster.client() as client:
        failed = await client.submit_task("flaky", [counter, 5])
        assert failed.status == TaskStatus.FAILURE

        # Then it is a dead letter, with its arguments and its last attempt's traceback
        store = await listed(cluster, task_name="flaky")
        [letter] = store.tasks
        assert (letter.task_id, letter.args, letter.attempts) == (failed.task_id, [counter, 5], 4)
        assert letter.error is not None
        assert "RuntimeError: failure number 4" in letter.error.traceback
        assert len(letter.attempt_errors) == 4
        assert (await listed(cluster, error_type="RuntimeError")).total == 1
        assert (await listed(cluster, error_type="KeyError")).total == 0

        # When it is retried
        retry = RetryFailed(filter=FailedFilter(task_ids=[failed.task_id, "unknown"]))
        retried = await ask(cluster, retry, FailedRetried)

        # Then a new task runs it again (its fifth run succeeds), linked to the original
        [one] = retried.retried
        assert (one.task_id, retried.missing) == (failed.task_id, ["unknown"])
        again = await client.wait_result(one.new_task_id, timeout=20)
        assert (again.status, again.result) == (TaskStatus.SUCCESS, 5)
        linked = await result_of(cluster, one.new_task_id)
        assert linked is not None
        assert linked.retry_of == failed.task_id
        assert (await listed(cluster)).stored == 0


async def test_the_dead_letter_store_survives_a_restart_and_a_purge_stays_done(
    cluster: Cluster, tmp_path: Path
) -> None:
    state = tmp_path / "state"

    def start() -> Proc:
        return cluster.control_plane("--state-dir", str(state))

    # Given two dead letters on a durable control plane
    plane = start()
    async with cluster.client() as client:
        first = await client.submit_task("explode", ["first"])
        second = await client.submit_task("explode", ["second"])
    assert {first.status, second.status} == {TaskStatus.FAILURE}

    # When it restarts, then both are still there, with their arguments
    plane.stop()
    plane = start()
    async with cluster.client() as client:
        await cluster.workers(client, 1, timeout=20)
    store = await listed(cluster)
    assert [(t.task_id, t.args) for t in store.tasks] == [
        (second.task_id, ["second"]),
        (first.task_id, ["first"]),
    ]
    assert store.tasks[0].error is not None
    assert "RuntimeError: second" in store.tasks[0].error.traceback

    # When one is purged and it restarts again, then only the other is left
    purge = PurgeFailed(filter=FailedFilter(task_ids=[first.task_id]))
    assert (await ask(cluster, purge, FailedPurged)).purged == 1
    plane.stop()
    start()
    async with cluster.client() as client:
        await cluster.workers(client, 1, timeout=20)
    assert [t.task_id for t in (await listed(cluster)).tasks] == [second.task_id]


async def test_a_bulk_retry_of_a_thousand_dead_letters_runs_every_one(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given 1,000 tasks that fail their first run
    markers = tmp_path / "markers"
    markers.mkdir()
    cluster.control_plane(local_concurrency=8)
    async with cluster.client() as client:
        ids = await client.submit_batch([("fails_first", (str(markers), i)) for i in range(1000)])
        failed = await client.wait_results(ids, timeout=120)
        assert {r.status for r in failed} == {TaskStatus.FAILURE}

        async def all_dead() -> bool:
            return (await listed(cluster, task_name="fails_first")).total == 1000

        await wait_until(all_dead, 20, "1,000 dead letters")

        # When every matching one is retried at once
        started = time.monotonic()
        retry = RetryFailed(filter=FailedFilter(task_name="fails_first"), all_matching=True)
        retried = await ask(cluster, retry, FailedRetried)
        acknowledged = time.monotonic() - started

        # Then all 1,000 run again and succeed, each linked to its dead letter
        assert (len(retried.retried), retried.more, retried.missing) == (1000, False, [])
        assert {r.task_id for r in retried.retried} == set(ids)
        new_ids = [r.new_task_id for r in retried.retried]
        results = await client.wait_results(new_ids, timeout=120)
        finished = time.monotonic() - started
        assert {r.status for r in results} == {TaskStatus.SUCCESS}
        original = {r.new_task_id: r.task_id for r in retried.retried}
        assert sorted(r.result for r in results) == list(range(1000))
        sample = await result_of(cluster, new_ids[0])
        assert sample is not None
        assert sample.retry_of == original[new_ids[0]]
        assert (await listed(cluster)).stored == 0
    print(f"bulk retry of 1,000: acknowledged in {acknowledged:.3f} s, done in {finished:.2f} s")
