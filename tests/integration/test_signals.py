"""Signal handlers in real processes: a subworker and a control plane that runs tasks itself
call them once per attempt, in the thread (and process) that runs the task, in every pool;
each process (and each process pool child) fires ``worker_process_init`` once and
``worker_shutdown`` as it stops; a raising handler fails nothing.

The handlers (``it_signals``, ``it_signal_handlers``) append JSON lines to a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import Cluster, Proc, wait_until

from fastworker import Client, TaskStatus

MODULES = ("--task-modules", "it_tasks", "it_signals", "it_signal_handlers")
SUCCEEDING = ("sig_add", "sig_async_add", "sig_process_add")

pytestmark = pytest.mark.integration

Lines = list[dict[str, Any]]


def read(log: Path) -> Lines:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def of(lines: Lines, signal: str, **match: Any) -> Lines:
    return [
        line
        for line in lines
        if line["signal"] == signal and all(line.get(k) == v for k, v in match.items())
    ]


async def run_every_kind(client: Client) -> tuple[dict[str, Any], str]:
    """Each succeeding task once (the sync one a few times: the quick lane may take it),
    and the failing one (two attempts); returns {task id: where it ran}, the failing id."""
    ran: dict[str, Any] = {}
    for name in (*SUCCEEDING, "sig_add", "sig_add"):
        result = await client.submit_task(name, args=(1, 2), timeout=30)
        assert result.status == TaskStatus.SUCCESS, result.error  # despite the raising handler
        ran[result.task_id] = (name, result.result)
    failed = await client.submit_task("sig_fail", args=("disk full",), timeout=30)
    assert failed.status == TaskStatus.FAILURE
    assert failed.attempts == 2
    return ran, failed.task_id


def check_task_signals(lines: Lines, ran: dict[str, Any], failed_id: str) -> set[int]:
    """Once per attempt, where the task ran; returns the pids of process-pool children."""
    children = set()
    for task_id, (name, (pid, thread)) in ran.items():
        for signal in ("prerun", "postrun"):
            (line,) = of(lines, signal, id=task_id)
            assert (line["pid"], line["thread"], line["context"]) == (pid, thread, task_id)
            assert line["attempt"] == 1
        assert of(lines, "postrun", id=task_id)[0]["state"] == "success"
        assert of(lines, "prerun", id=task_id)[0]["args"] == [1, 2]
        awaited = of(lines, "postrun async", id=task_id)
        assert len(awaited) == (1 if name == "sig_async_add" else 0)  # async tasks only
        assert not of(lines, "failure", id=task_id)
        if name == "sig_process_add":
            children.add(pid)
    failures = of(lines, "failure", id=failed_id)
    assert [(f["attempt"], f["exception"], f["message"]) for f in failures] == [
        (1, "ValueError", "disk full"),
        (2, "ValueError", "disk full"),
    ]
    assert all(f["retryable"] is True for f in failures)
    assert [p["state"] for p in of(lines, "postrun", id=failed_id)] == ["failure", "failure"]
    assert [p["attempt"] for p in of(lines, "prerun", id=failed_id)] == [1, 2]
    return children


def check_worker_signals(lines: Lines, worker_pid: int, children: set[int]) -> None:
    (init,) = of(lines, "init", pid=worker_pid)
    assert (init["child"], init["reported_pid"]) == (False, worker_pid)
    child_inits = of(lines, "init", child=True)
    assert children <= {line["pid"] for line in child_inits}
    assert len(child_inits) == len({line["pid"] for line in child_inits})  # once per child
    for child in children:  # before the child runs anything
        first = next(line for line in lines if line["pid"] == child)
        assert first["signal"] == "init"


async def stopped_and_shut_down(proc: Proc, log: Path, children: set[int]) -> Lines:
    proc.stop()

    def shut(lines: Lines) -> bool:
        pids = {line["pid"] for line in of(lines, "shutdown")}
        return proc.pid in pids and children <= pids

    async def done() -> bool:
        return shut(read(log))

    await wait_until(done, 10, "worker_shutdown in the worker and its children")
    return read(log)


def env_for(cluster: Cluster, log: Path) -> dict[str, str]:
    return cluster.env(IT_SIGNALS_LOG=str(log))


async def test_a_subworker_calls_handlers_per_attempt_in_every_pool_and_per_process(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a control plane that runs nothing and a subworker with two process children
    log = tmp_path / "signals.jsonl"
    cluster.control_plane(local_concurrency=0, env=env_for(cluster, log))
    worker = cluster.subworker(*MODULES, "--processes", "2", env=env_for(cluster, log))
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        # When it runs a task of each pool, and one that fails twice
        ran, failed_id = await run_every_kind(client)
    # Then every attempt fired its handlers where it ran, and each process its init
    lines = read(log)
    children = check_task_signals(lines, ran, failed_id)
    assert worker.pid not in children
    check_worker_signals(lines, worker.pid, children)
    assert len(of(lines, "init", child=True)) == 2
    # And stopping it fires worker_shutdown (an async handler) in it and its children
    await stopped_and_shut_down(worker, log, children)


async def test_a_control_plane_running_tasks_itself_calls_the_same_handlers(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a control plane alone, running its tasks with one process child
    log = tmp_path / "signals.jsonl"
    control_plane = cluster.control_plane(
        *MODULES, "--local-processes", "1", env=env_for(cluster, log)
    )
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        ran, failed_id = await run_every_kind(client)
    lines = read(log)
    children = check_task_signals(lines, ran, failed_id)
    pids = [pid for _, (pid, _) in ran.values()]
    assert pids.count(control_plane.pid) == len(ran) - 1  # all but the process task
    check_worker_signals(lines, control_plane.pid, children)
    await stopped_and_shut_down(control_plane, log, children)
