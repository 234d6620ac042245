"""A control plane whose journal writer dies (of anything, not only a disk error) fails
every acknowledgement waiting on it at once, says why on /readyz, and stops with an
error, instead of leaving every client waiting for ever while it looks ready."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from harness import wait_until

from fastworker import Client, RequestRejected, TaskRegistry, task
from fastworker.testing import free_port_block
from fastworker_common.supervision import TaskDied
from fastworker_control_plane.app import ControlPlane
from fastworker_control_plane.config import ControlPlaneConfig

DEADLINE = 5.0


def add(x: int, y: int) -> int:
    return x + y


async def test_a_journal_writer_that_dies_fails_every_wait_and_stops_the_control_plane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a durable control plane, serving
    registry = TaskRegistry()
    task(registry=registry)(add)
    config = ControlPlaneConfig(
        base_port=free_port_block(6),
        discovery_port=free_port_block(1),
        http_port=0,
        local_concurrency=0,
        state_dir=str(tmp_path / "state"),
    )
    plane = ControlPlane(config, registry)
    running = asyncio.create_task(plane.run())
    discovery = f"tcp://127.0.0.1:{config.discovery_port}"
    async with Client(discovery, timeout=DEADLINE, retries=0) as client:

        async def ready() -> bool:
            return plane.readiness() is None

        await wait_until(ready, 10, "the control plane to be ready")
        await client.delay("add", 1, 2)  # acknowledged: the journal works
        # When its writer dies of a bug (not an OSError)
        journal = plane.engine.journal
        assert journal is not None

        def bug(payloads: list[bytes]) -> None:
            raise RuntimeError("a bug in the writer")

        monkeypatch.setattr(journal, "_write", bug)
        # Then the submission waiting on it fails promptly (not after the client's timeout)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(RequestRejected, match="journal cannot be written"):
            await client.delay("add", 3, 4)
        assert loop.time() - started < DEADLINE
        # And its readiness (what /readyz answers until it has closed) says why
        said = plane.readiness() or ""
        assert "the journal writer failed: RuntimeError: a bug in the writer" in said
    # And run() ends with an error the CLI turns into a non-zero exit
    with pytest.raises(TaskDied, match="the journal writer failed"):
        await asyncio.wait_for(running, 15)
    assert "journal writer failed" in (plane.readiness() or "")
