"""``fastworker dev``: one command runs a control plane and subworkers with prefixed logs,
reloads task code on change, and stops everything on Ctrl-C, leaving nothing running."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from harness import free_port_block, wait_until

from fastworker import Client

TASKS_V1 = """from fastworker import task


@task
def greet(name: str) -> str:
    return "hello " + name
"""
TASKS_V2 = TASKS_V1.replace('"hello "', '"goodbye "')


class Dev:
    """A ``fastworker dev`` process in a directory of its own, on free ports."""

    def __init__(self, where: Path, *args: str, http_port: int | None = None) -> None:
        self.discovery_port = free_port_block(1)
        self.http_port = http_port or free_port_block(1)
        self.log = where / "dev.log"
        ports = ["--base-port", str(free_port_block(6)), "--discovery-port"]
        ports += [str(self.discovery_port), "--http-port", str(self.http_port)]
        with self.log.open("wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "fastworker.cli", "dev", *ports, *args],
                cwd=where,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")},
            )

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def discovery(self) -> str:
        return f"tcp://127.0.0.1:{self.discovery_port}"

    async def ready(self) -> None:
        async def said_ready() -> bool:
            assert self.popen.poll() is None, self.output
            return "ready:" in self.output

        await wait_until(said_ready, 60, "fastworker dev to say it is ready")

    def children(self) -> list[int]:
        """Processes still running that were started for this cluster (by its port)."""
        marker = str(self.discovery_port).encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.popen.pid:
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if b"fastworker.cli" in cmdline and marker in cmdline:
                    found.append(int(entry.name))
        return found

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        for pid in self.children():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def dev_dir(tmp_path: Path) -> Path:
    (tmp_path / "devtasks.py").write_text(TASKS_V1)
    return tmp_path


async def test_dev_runs_reloads_and_stops_everything_on_ctrl_c(dev_dir: Path) -> None:
    dev = Dev(dev_dir, "--task-modules", "devtasks", "--subworkers", "2", "--reload")
    try:
        # Given a dev cluster that said where it listens
        await dev.ready()
        assert f"http://127.0.0.1:{dev.http_port}/" in dev.output
        assert len(dev.children()) == 3
        async with Client(dev.discovery, timeout=20) as client:
            assert (await client.submit_task("greet", args=("ada",))).result == "hello ada"

            # When the task code changes, then the workers run the new code
            (dev_dir / "devtasks.py").write_text(TASKS_V2)

            async def reloaded() -> bool:
                result = await client.submit_task("greet", args=("ada",))
                return bool(result.result == "goodbye ada")

            await wait_until(reloaded, 60, "the changed task code to run")
        # Every process's lines came through under its name
        for name in ("control-plane |", "subworker-1 |", "subworker-2 |", "dev |"):
            assert name in dev.output

        # When Ctrl-C is pressed, then everything stops, and nothing is left running
        dev.popen.send_signal(signal.SIGINT)
        assert await asyncio.to_thread(dev.popen.wait, 60) == 0
        assert dev.children() == []
        assert "stopped" in dev.output
    finally:
        dev.stop()


def test_a_port_in_use_is_one_clear_error(dev_dir: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        dev = Dev(dev_dir, "--task-modules", "devtasks", http_port=squatter.getsockname()[1])
        try:
            assert dev.popen.wait(60) == 2
        finally:
            dev.stop()
    assert "already in use" in dev.output
    assert "control-plane exited with code 2" in dev.output
    assert dev.children() == []
