"""``fastworker failed`` and ``fastworker schedules add|list|remove`` against a real control
plane (issue 22): a task that failed for good is listed, shown with its traceback, retried
as a new task linked to it; a schedule added at run time with arguments runs, is listed,
and stops once removed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import Cluster, wait_until
from it_tasks import add, explode

from fastworker import Client, SyncClient


async def _fastworker(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fastworker.cli",
        *args,
        "--discovery-address",
        cluster.discovery,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cluster.env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


async def _failed_for_good(client: Client, task_id: str) -> None:
    """Wait until ``task_id`` is final and in the dead-letter store."""
    await client.wait_result(task_id, timeout=20)

    async def stored() -> bool:
        return any(d.task_id == task_id for d in await client.list_failed(limit=1000))

    await wait_until(stored, 10, f"dead letter {task_id}")


async def test_a_task_failed_after_its_retries_is_listed_and_shown_with_its_traceback(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    # Given a task that fails on each of its 4 attempts (max_retries=3)
    task_id = await client.delay("flaky", str(tmp_path / "count"), 100)
    await _failed_for_good(client, task_id)

    # When the failed tasks of that name are listed, then shown
    listed = await _fastworker(cluster, "failed", "list", "--task-name", "flaky", "--since", "1h")
    shown = await _fastworker(cluster, "failed", "show", task_id)

    # Then it is in the table, with its error and attempts, and shown whole
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:4] == ["TASK", "NAME", "ERROR", "MESSAGE"]
    (row,) = [r for r in rows if r.startswith(task_id)]
    assert row.split()[1:3] == [
        "it_tasks.flaky",
        "RuntimeError",
    ]  # --task-name flaky: its full name
    assert "failure number 4" in row
    assert shown.returncode == 0, shown.stderr
    assert "attempts   4" in shown.stdout
    assert "--- attempt 4 (last): RuntimeError: failure number 4" in shown.stdout
    assert "Traceback (most recent call last)" in shown.stdout
    assert 'raise RuntimeError(f"failure number {count}")' in shown.stdout
    assert "retry of   -" in shown.stdout


async def test_retry_runs_the_failed_task_again_as_a_new_task_linked_to_it(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    # Given a task that failed its 4 attempts and would succeed on a 5th
    task_id = await client.delay("flaky", str(tmp_path / "count"), 5)
    await _failed_for_good(client, task_id)

    # When it is retried
    retried = await _fastworker(cluster, "failed", "retry", task_id)

    # Then a new task runs it, succeeds, and names the one it retried
    assert retried.returncode == 0, retried.stderr
    line, count = retried.stdout.splitlines()
    old, arrow, new_id = line.split()
    assert (old, arrow, count) == (task_id, "->", "retried 1 failed task")
    assert (await client.wait_result(new_id, timeout=20)).result == 5
    result = await _fastworker(cluster, "result", "--task-id", new_id, "--json")
    assert json.loads(result.stdout)["retry_of"] == task_id
    # and the dead letter has left the store: retrying it again finds nothing
    again = await _fastworker(cluster, "failed", "retry", task_id)
    assert again.returncode == 1
    assert f"not found: {task_id}" in again.stderr


async def test_a_retry_that_fails_again_is_a_dead_letter_that_shows_what_it_retried(
    cluster: Cluster, client: Client
) -> None:
    task_id = await client.delay("explode", "always")
    await _failed_for_good(client, task_id)

    retried = await _fastworker(
        cluster, "failed", "retry", "--all-matching", "--task-name", "explode"
    )
    assert retried.returncode == 0, retried.stderr
    new_id = retried.stdout.splitlines()[0].split()[-1]
    await _failed_for_good(client, new_id)
    shown = await _fastworker(cluster, "failed", "show", new_id)

    assert f"retry of   {task_id}" in shown.stdout
    assert "RuntimeError: always" in shown.stdout


async def test_failed_show_of_an_unknown_id_and_purge(cluster: Cluster, client: Client) -> None:
    unknown = await _fastworker(cluster, "failed", "show", "nope")
    assert unknown.returncode == 2
    assert "no dead letter nope" in unknown.stderr

    task_id = await client.delay("explode", "purge me")
    await _failed_for_good(client, task_id)
    purged = await _fastworker(cluster, "failed", "purge", task_id)
    assert (purged.returncode, purged.stdout.strip()) == (0, "purged 1 failed task")
    gone = await _fastworker(cluster, "failed", "show", task_id)
    assert gone.returncode == 2


async def test_a_schedule_added_with_arguments_runs_is_listed_and_stops_once_removed(
    cluster: Cluster, client: Client
) -> None:
    # When a schedule of echo("hello") every half second is added
    added = await _fastworker(
        cluster, "schedules", "add", "greeting", "echo", '"hello"', "--every", "0.5"
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith('schedule greeting: it_tasks.echo("hello") every')

    # Then it runs, with its argument (a run counts once it is submitted; its task may
    # finish a moment later)
    async def ran() -> bool:
        infos = {s.name: s for s in await client.list_schedules()}
        page = await client.list_tasks(limit=1000)
        finished = any(t.name == "it_tasks.echo" and t.result == "hello" for t in page)
        return "greeting" in infos and infos["greeting"].times_run >= 1 and finished

    await wait_until(ran, 15, "a run of the added schedule, its result hello")

    # and is listed by name, with its arguments
    listed = await _fastworker(cluster, "schedules", "list")
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in listed.stdout.splitlines() if "greeting" in r]
    assert row.split()[0] == "it_tasks.echo"  # added as echo: kept as its full name
    assert '"hello"' in row

    # When it is removed
    removed = await _fastworker(cluster, "schedules", "remove", "greeting")

    # Then it is gone from the listing, and a second removal finds nothing
    assert removed.stdout.strip() == "schedule greeting removed"
    assert "greeting" not in (await _fastworker(cluster, "schedules")).stdout
    again = await _fastworker(cluster, "schedules", "remove", "greeting")
    assert again.stdout.strip() == "not removed: no schedule was added as greeting"


async def test_a_schedule_on_a_task_nobody_registered_is_rejected(
    cluster: Cluster, client: Client
) -> None:
    done = await _fastworker(
        cluster, "schedules", "add", "bad", "no_such_task", "--cron", "0 3 * * *"
    )

    assert done.returncode == 2
    assert "rejected" in done.stderr


async def test_the_sdk_filters_by_error_type_and_time_and_retries_all_matching(
    cluster: Cluster, client: Client, tmp_path: Path
) -> None:
    # Given two failed tasks, of two error types
    before = datetime.now(UTC) - timedelta(seconds=1)
    boom = await client.delay(explode, "boom")
    picky = await client.delay("picky", str(tmp_path / "count"))  # ValueError, not retried
    for task_id in (boom, picky):
        await _failed_for_good(client, task_id)

    # When they are listed by error type and time, from the blocking client too
    runtime = await client.list_failed(error_type="RuntimeError", since=before)
    none_yet = await client.list_failed(until=before)
    with SyncClient(cluster.discovery, timeout=20) as blocking:
        shown = await asyncio.to_thread(blocking.get_failed, picky)

    # Then each filter holds, and a dead letter is read whole
    assert [d.task_id for d in runtime] == [boom]
    assert (runtime.total, none_yet.total) == (1, 0)
    assert shown.error is not None
    assert shown.error.type == "ValueError"
    assert shown.args == [str(tmp_path / "count")]

    # When every RuntimeError is retried
    retried = await client.retry_failed(all_matching=True, error_type="RuntimeError")

    # Then only that one ran again, linked to it
    assert [r.task_id for r in retried] == [boom]
    again = await client.wait_result(retried[0].new_task_id, timeout=20)
    assert again.retry_of == boom
    assert [d.task_id for d in await client.list_failed(error_type="ValueError")] == [picky]


async def test_the_sdk_adds_a_schedule_of_a_task_object_every_timedelta(
    cluster: Cluster, client: Client
) -> None:
    info = await client.add_schedule("sum-2-3", add, args=[2, 3], interval=timedelta(seconds=0.5))

    expected = ("sum-2-3", "it_tasks.add", [2, 3], "runtime")
    assert (info.name, info.task, info.args, info.source) == expected

    async def ran() -> bool:
        page = await client.list_tasks(limit=100)
        return any(t.name == "it_tasks.add" and t.result == 5 for t in page)

    await wait_until(ran, 15, "a run of add(2, 3)")
    assert await client.remove_schedule("sum-2-3") is True
    assert "sum-2-3" not in {s.name for s in await client.list_schedules()}
