"""The journal across restarts of real control planes: what it keeps whatever the result
cache holds, and damage it refuses to replay silently."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from harness import Cluster, wait_until
from http_helpers import fastworker

TASKS = 2_000


async def test_finished_tasks_do_not_run_again_after_a_restart_however_small_the_cache(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane that keeps only 20 results, and 2,000 tasks it ran
    state, runs = tmp_path / "state", tmp_path / "runs"
    runs.mkdir()
    options = ("--state-dir", str(state), "--result-max-size", "20")
    plane = cluster.control_plane(*options)
    async with cluster.client() as client:
        await client.submit_batch([("mark", (str(runs), i, 0.0)) for i in range(TASKS)])

        async def all_final() -> bool:
            if len(list(runs.iterdir())) < TASKS:
                return False  # cheap until every task has run; then ask
            return all(t.status.is_final for t in await client.list_tasks(limit=TASKS))

        await wait_until(all_final, 60, f"{TASKS} tasks to finish")
    # When it restarts on its journal, with nothing to run tasks
    plane.stop()
    cluster.control_plane(*options, local_concurrency=0)
    async with cluster.client() as client:
        live = [t for t in await client.list_tasks(limit=TASKS) if not t.status.is_final]
    # Then none of them is back in a queue to run again
    print(f"{len(live)} of {TASKS} finished tasks came back to run again")
    assert live == []


async def test_a_journal_damaged_before_its_end_is_refused_untouched_until_salvaged(
    cluster: Cluster, tmp_path: Path
) -> None:
    # Given a durable control plane that took ten delayed tasks, one write each
    state = tmp_path / "state"
    plane = cluster.control_plane("--state-dir", str(state), local_concurrency=0)
    async with cluster.client() as client:
        ids = [await client.delay("add", i, 1, countdown=3600) for i in range(10)]
    plane.stop()
    # When one byte in the middle of its journal flips
    listed = await fastworker(cluster, "journal", "dump", str(state))
    assert listed.returncode == 0, listed.stderr
    entries = [json.loads(line) for line in listed.stdout.splitlines()]
    middle = entries[5]
    journal = state / "journal"
    data = bytearray(journal.read_bytes())
    data[middle["offset"] + 20] ^= 0x01
    journal.write_bytes(bytes(data))
    # Then it refuses to start, in one line naming where, and changes nothing on disk
    refused = cluster.control_plane("--state-dir", str(state), local_concurrency=0)
    assert await asyncio.to_thread(refused.wait) == 2
    [said] = [line for line in refused.output().splitlines() if "damaged" in line]
    assert said.startswith("fastworker-control-plane: the journal ")
    assert f"damaged at byte {middle['offset']}" in said
    assert "4 intact frames follow it" in said
    assert journal.read_bytes() == bytes(data)
    assert sorted(p.name for p in state.iterdir()) == ["journal", "lock"]
    # And `fastworker journal dump` shows the same damage, exiting 1
    damaged = await fastworker(cluster, "journal", "dump", str(state))
    assert damaged.returncode == 1
    assert f"DAMAGED at byte {middle['offset']}" in damaged.stderr
    # When the operator salvages it (here through the environment)
    env = cluster.env(FASTWORKER_SALVAGE_JOURNAL="1")
    salvaged = cluster.control_plane("--state-dir", str(state), local_concurrency=0, env=env)
    async with cluster.client() as client:
        kept = [await client.get_task_result(task_id) for task_id in ids]
    # Then every task but the damaged write's is back, and the damaged file is kept aside
    assert [r is not None for r in kept] == [n != 5 for n in range(10)]
    assert len([p for p in state.iterdir() if p.name.startswith("journal.damaged-")]) == 1
    # And the journal it goes on with is intact: the next start needs no salvage
    salvaged.stop()
    cluster.control_plane("--state-dir", str(state), local_concurrency=0)
    async with cluster.client() as client:
        assert await client.get_task_result(ids[9]) is not None
