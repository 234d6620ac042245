"""A control plane whose state dir's disk fills up, on a real full filesystem (a small
tmpfs, mounted for the test: it needs root, which CI has; elsewhere it is skipped, never
under CI=true): it says it is unready while the journal cannot be written and ready again
once it can, and it starts again after crashing on the full disk."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from harness import Cluster
from http_helpers import get_json, wait_for_status

from fastworker import RequestRejected

BIG = "y" * 20_000  # more than the page a tmpfs may still have free in the journal's file


@pytest.fixture
def disk(tmp_path: Path, cluster: Cluster) -> Iterator[Path]:
    """A 4 MiB tmpfs; unmounted once the test's processes are gone."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        why = f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why} (CI runs as root: this test must run there)")
        pytest.skip(why)
    try:
        yield mount_point
    finally:
        cluster.stop()
        if subprocess.run(["umount", str(mount_point)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(directory: Path) -> Path:
    """Write a file until the filesystem is full."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError, match="No space left on device"):
            _write_for_ever(fd)
    finally:
        os.close(fd)
    return filler


def _write_for_ever(fd: int) -> None:
    while True:
        os.write(fd, b"x" * 65536)


async def test_a_full_disk_makes_the_control_plane_unready_and_a_crash_on_it_recoverable(
    cluster: Cluster, disk: Path
) -> None:
    state = disk / "state"
    plane = cluster.control_plane("--state-dir", str(state), local_concurrency=0)
    readyz = f"{cluster.http}/readyz"
    async with aiohttp.ClientSession() as http:
        await wait_for_status(http, readyz, 200)
        async with cluster.client(timeout=5, retries=0) as client:
            acked = [await client.delay("echo", BIG, countdown=3600) for _ in range(5)]
            # Given a disk that fills up
            filler = fill(disk)
            # When a submission must be journaled, it fails, and /readyz says why
            with pytest.raises(RequestRejected, match="No space left on device"):
                await client.delay("echo", BIG, countdown=3600)
            status, body = await get_json(http, readyz)
            assert status == 503
            assert body["status"].startswith("journal cannot be written: ")
            assert "No space left on device" in body["status"]
        # When it crashes there, then it starts again on the same full disk
        plane.signal(signal.SIGKILL)
        await asyncio.to_thread(plane.wait)
        cluster.control_plane("--state-dir", str(state), local_concurrency=0)
        readyz = f"{cluster.http}/readyz"  # (a new process: a new HTTP port)
        await wait_for_status(http, readyz, 200)
        async with cluster.client(timeout=5, retries=0) as client:
            assert all([await client.get_task_result(t) for t in acked])
            # (its compaction could not run, and left nothing behind)
            assert sorted(p.name for p in state.iterdir()) == ["journal", "lock"]
            with pytest.raises(RequestRejected, match="No space left on device"):
                await client.delay("echo", BIG, countdown=3600)
            await wait_for_status(http, readyz, 503)
            # When space comes back, then it is ready again by itself, and takes work
            filler.unlink()
            await wait_for_status(http, readyz, 200)
            assert await client.delay("echo", BIG, countdown=3600)
