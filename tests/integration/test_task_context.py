"""``current_task()`` in real subworkers: the id and the attempt number, every attempt."""

from __future__ import annotations

from pathlib import Path

from harness import Cluster

from fastworker import Client, TaskStatus


def _seen(path: Path) -> list[tuple[str, int, str]]:
    return [
        (task_id, int(attempt), queue)
        for task_id, attempt, queue in (line.split() for line in path.read_text().splitlines())
    ]


async def test_a_retried_task_sees_its_id_and_each_attempt_number(
    client: Client, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    result = await client.submit_task("attempts_seen", args=(str(seen), 3), timeout=20)
    assert result.status == TaskStatus.SUCCESS, result.error
    assert result.result == result.task_id
    assert _seen(seen) == [(result.task_id, n, "default") for n in (1, 2, 3)]


async def test_a_process_task_sees_them_in_its_child(cluster: Cluster, tmp_path: Path) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker("--task-modules", "it_processes", "--processes", "1")
    seen = tmp_path / "seen"
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        result = await client.submit_task("attempts_seen_in_child", args=(str(seen), 2), timeout=20)
    assert result.status == TaskStatus.SUCCESS, result.error
    assert _seen(seen) == [(result.task_id, n, "default") for n in (1, 2)]
