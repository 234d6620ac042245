"""Fixtures of the shop's tests. FastWorker's (``fastworker_eager``, ``fastworker_cluster``,
``fastworker_client``) come with it; here, an empty outbox for each test, the in-process
cluster's clock pinned to a known time, and a real control plane and subworker for the
tests that need the processes and the network."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import tasks

import fastworker
from fastworker import SyncClient
from fastworker.testing import Cluster, free_port_block

HERE = Path(__file__).parent
SCRIPTS = Path(sys.executable).parent  # the virtualenv's bin/, where pip put the commands


@pytest.fixture(autouse=True)
def empty_outbox() -> None:
    tasks.outbox.clear()


@pytest.fixture
def fastworker_cluster() -> Iterator[Cluster]:
    """FastWorker's fixture, overridden to start the clock at a known time (a Monday,
    10:00 in Berlin) rather than now: a test never depends on the day it runs."""
    with Cluster(start=datetime(2026, 3, 2, 9, tzinfo=UTC)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A control plane and a subworker running tasks.py, started as in production, on
    ports of their own; the default client (``add.delay()``) talks to them. Yields the
    discovery address."""
    base = free_port_block(7)  # 6 request ports, then the discovery port
    discovery = f"tcp://127.0.0.1:{base + 6}"
    env = {
        **os.environ,
        "FASTWORKER_BASE_PORT": str(base),
        "FASTWORKER_DISCOVERY_PORT": str(base + 6),
        "FASTWORKER_DISCOVERY_ADDRESS": discovery,
        "FASTWORKER_HTTP_PORT": "0",  # no dashboard
    }
    logs = tmp_path_factory.mktemp("real-cluster")
    commands = {
        "control-plane": ["fastworker-control-plane", "--local-concurrency", "0"],
        "subworker": ["fastworker-subworker", "--concurrency", "4"],
    }
    processes = []
    for name, (command, *options) in commands.items():
        with (logs / f"{name}.log").open("wb") as log:
            argv = [str(SCRIPTS / command), "--task-modules", "tasks", *options]
            processes.append(subprocess.Popen(argv, cwd=HERE, env=env, stdout=log, stderr=log))
    try:
        with SyncClient(discovery, connect_timeout=30) as client:
            deadline = time.monotonic() + 30
            while not any(
                not w.local and "tasks.charge_card" in w.tasks for w in client.list_workers()
            ):
                assert time.monotonic() < deadline, (logs / "subworker.log").read_text()
                time.sleep(0.05)
        fastworker.configure(discovery_address=discovery)
        yield discovery
    finally:
        fastworker.configure()
        for process in processes:
            process.terminate()  # SIGTERM: each drains, then exits
        for process in processes:
            process.wait(30)
