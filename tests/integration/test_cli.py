"""The ``fastworker`` command against a real control plane."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from harness import Cluster

from fastworker import Client
from fastworker.testing import free_port_block


async def _fastworker(cluster: Cluster, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "fastworker.cli",
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cluster.env(**env),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


async def test_submit_prints_the_result_and_exits_0(cluster: Cluster, client: Client) -> None:
    done = await _fastworker(
        cluster,
        "submit",
        "--task-name",
        "add",
        "--args",
        "5",
        "3",
        "--discovery-address",
        cluster.discovery,
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "8", "")


async def test_every_flag_also_reads_its_environment_variable(
    cluster: Cluster, client: Client
) -> None:
    done = await _fastworker(
        cluster,
        "submit",
        "--task-name",
        "echo",
        "--args",
        "hello",
        "--priority",
        "high",
        FASTWORKER_DISCOVERY_ADDRESS=cluster.discovery,
    )
    assert (done.returncode, done.stdout.strip()) == (0, '"hello"')


async def test_a_failed_task_exits_1_with_the_error_on_stderr(
    cluster: Cluster, client: Client
) -> None:
    done = await _fastworker(
        cluster,
        "submit",
        "--task-name",
        "explode",
        "--args",
        "bad",
        "--discovery-address",
        cluster.discovery,
    )
    assert done.returncode == 1
    assert "RuntimeError: bad" in done.stderr


async def test_non_blocking_submit_then_status_result_and_cancel(
    cluster: Cluster, client: Client
) -> None:
    where = ("--discovery-address", cluster.discovery)
    submitted = await _fastworker(
        cluster, "submit", "--task-name", "add", "--args", "1", "2", "--non-blocking", *where
    )
    task_id = submitted.stdout.strip()
    assert submitted.returncode == 0
    assert len(task_id) == 32
    result = await _fastworker(cluster, "result", "--task-id", task_id, "--wait", *where)
    assert (result.returncode, result.stdout.strip()) == (0, "3")
    status = await _fastworker(cluster, "status", "--task-id", task_id, *where)
    assert status.stdout.strip() == "success"
    cancel = await _fastworker(cluster, "cancel", "--task-id", task_id, *where)
    assert cancel.stdout.strip() == "not cancelled: task is already success"
    long_id = await client.delay("nap", 30)
    cancel = await _fastworker(cluster, "cancel", "--task-id", long_id, *where)
    assert cancel.stdout.strip() == "cancelled"
    assert (await client.get_task_result(long_id)).status == "cancelled"  # type: ignore[union-attr]


async def test_workers_and_tasks_print_tables_or_json(cluster: Cluster, client: Client) -> None:
    await client.submit_task("add", args=(1, 1))
    where = ("--discovery-address", cluster.discovery)
    workers = await _fastworker(cluster, "workers", *where)
    assert workers.returncode == 0
    assert workers.stdout.splitlines()[0].split()[:2] == ["WORKER", "STATE"]
    assert "(local)" in workers.stdout
    tasks = await _fastworker(cluster, "tasks", "--json", *where)
    assert '"name":"it_tasks.add"' in tasks.stdout
    assert '"status":"success"' in tasks.stdout


async def test_usage_and_connection_errors_exit_2_with_one_line(cluster: Cluster) -> None:
    nobody = f"tcp://127.0.0.1:{free_port_block(1)}"
    done = await _fastworker(
        cluster,
        "submit",
        "--task-name",
        "add",
        "--args",
        "1",
        "2",
        "--discovery-address",
        nobody,
        "--timeout",
        "1",
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "no control plane" in done.stderr
    unknown = await _fastworker(
        cluster, "status", "--task-id", "x", "--timeout", "1", "--discovery-address", nobody
    )
    assert unknown.returncode == 2
    bad = await _fastworker(cluster, "submit", "--priority", "urgent", "--task-name", "add")
    assert bad.returncode == 2


async def test_an_unknown_task_id_is_a_usage_error(cluster: Cluster, client: Client) -> None:
    done = await _fastworker(
        cluster, "status", "--task-id", "nope", "--discovery-address", cluster.discovery
    )
    assert done.returncode == 2
    assert "unknown or expired" in done.stderr


async def test_a_second_control_plane_on_the_same_ports_exits_2_and_says_why(
    cluster: Cluster, client: Client
) -> None:
    second = cluster.control_plane()
    assert second.wait(timeout=20) == 2
    assert "already in use" in second.output()
    assert (await client.submit_task("add", args=(1, 1))).result == 2


async def test_an_announced_address_unreachable_from_here_is_named_with_the_fix(
    cluster: Cluster,
) -> None:
    # Given a control plane announcing a host name this machine cannot reach (as a
    # Compose service name is, seen from the host)
    cluster.control_plane("--advertise-host", "unreachable.invalid")
    base = f"tcp://127.0.0.1:{cluster.base_port}"
    async with Client(address=base, timeout=20) as ready:
        await ready.list_workers()
    # When the CLI is run without --address, as a user would
    started = time.monotonic()
    done = await _fastworker(
        cluster, "submit", "--task-name", "add", "--args", "1", "2",
        "--discovery-address", cluster.discovery,
    )  # fmt: skip
    # Then it fails at once, saying what it heard, what failed and what to pass instead
    assert time.monotonic() - started < 10
    assert done.returncode == 2
    announced = f"tcp://unreachable.invalid:{cluster.base_port}"
    assert f"a control plane announced itself at {announced}" in done.stderr
    assert "cannot be reached from here" in done.stderr
    assert f"pass --address {base}" in done.stderr
