"""``fastworker dev``: one command runs a control plane and subworkers with prefixed logs,
reloads task code on change, and stops everything on Ctrl-C, leaving nothing running."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from examples_harness import Dev
from harness import wait_until

from fastworker import Client
from fastworker.testing import free_port_block

TASKS_V1 = """from fastworker import task


@task
def greet(name: str) -> str:
    return "hello " + name
"""
TASKS_V2 = TASKS_V1.replace('"hello "', '"goodbye "')


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
        await dev.interrupt()
        assert "stopped" in dev.output
    finally:
        dev.kill()


async def test_a_killed_dev_leaves_nothing_running(dev_dir: Path) -> None:
    dev = Dev(dev_dir, "--task-modules", "devtasks", "--subworkers", "1")
    try:
        # Given a dev cluster running its control plane and a subworker
        await dev.ready()
        assert len(dev.children()) == 2
        # When `fastworker dev` itself is killed (no Ctrl-C, no chance to stop them)
        dev.popen.kill()
        dev.popen.wait()

        # Then its processes, each in a session of its own, stop by themselves
        async def all_gone() -> bool:
            return dev.children() == []

        await wait_until(all_gone, 30, "the dev cluster's processes to stop")
    finally:
        dev.kill()


def test_a_port_in_use_is_one_clear_error(dev_dir: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", free_port_block()))
        squatter.listen()
        dev = Dev(dev_dir, "--task-modules", "devtasks", http_port=squatter.getsockname()[1])
        try:
            assert dev.popen.wait(60) == 2
        finally:
            dev.kill()
    assert "already in use" in dev.output
    assert "control-plane exited with code 2" in dev.output
    assert dev.children() == []
