"""scripts/cluster, run for real: the addresses its banner prints are the ones the
FASTWORKER_* variables chose, and when the control plane fails (a port taken) or dies, the
script stops its subworkers and exits 1 instead of leaving them retrying forever."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from fastworker.testing import free_port_block, free_ports_apart

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _env(**ports: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
    env.update({f"FASTWORKER_{k.upper()}": str(v) for k, v in ports.items()})
    return env


def _free_ports() -> dict[str, int]:
    base, discovery, http, metrics = free_ports_apart(6, 1, 1, 2)
    return {
        "base_port": base,
        "discovery_port": discovery,
        "http_port": http,
        "metrics_port": metrics,
    }


def _start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(ROOT / "scripts" / "cluster")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, to see that nothing is left
    )


def _group_gone(pgid: int, timeout: float = 45) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port some other process (this test) is listening on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port_block()))
        held.listen()
        yield held.getsockname()[1]


def test_with_its_http_port_taken_the_script_exits_1_saying_so_and_leaves_nothing(
    held_port: int,
) -> None:
    ports = {**_free_ports(), "http_port": held_port}
    script = _start(_env(**ports))
    try:
        _, err = script.communicate(timeout=90)
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
    assert script.returncode == 1, err
    assert f"cannot serve HTTP on 127.0.0.1:{held_port}" in err
    assert "cluster: the control plane exited with status" in err
    assert "stopping the subworkers" in err
    assert _group_gone(script.pid)


def _read_banner(script: subprocess.Popen[str], until: str, timeout: float = 90) -> str:
    assert script.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while until not in seen:
        assert time.monotonic() < deadline, seen
        line = script.stderr.readline()
        assert line, f"scripts/cluster ended early:\n{seen}"
        seen += line
    return seen


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return int(reply.status)


def test_the_banner_prints_the_ports_the_variables_chose_and_a_dead_control_plane_ends_it() -> None:
    ports = _free_ports()
    script = _start(_env(**ports))
    try:
        banner = _read_banner(script, "Ctrl-C stops.")
        http, metrics = ports["http_port"], ports["metrics_port"]
        assert f"discovery tcp://127.0.0.1:{ports['discovery_port']}" in banner
        assert f"submission tcp://127.0.0.1:{ports['base_port']}" in banner
        assert f"dashboard http://127.0.0.1:{http}/" in banner
        assert f"subworker metrics http://127.0.0.1:{metrics}/metrics to :{metrics + 1}" in banner
        assert ":8080" not in banner
        assert _get(f"http://127.0.0.1:{http}/healthz") == 200

        # The subworkers, given the discovery port, register and serve their metrics ports
        def subworkers_ready() -> bool:
            try:
                return all(
                    _get(f"http://127.0.0.1:{p}/readyz") == 200 for p in (metrics, metrics + 1)
                )
            except OSError:
                return False

        deadline = time.monotonic() + 60
        while not subworkers_ready():
            assert time.monotonic() < deadline, "subworkers never ready"
            time.sleep(0.3)

        # When the control plane dies, the script stops the subworkers and exits 1
        control_plane = subprocess.run(
            ["pgrep", "-g", str(script.pid), "-f", "fastworker control-plane"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert len(control_plane) == 1
        os.kill(int(control_plane[0]), signal.SIGKILL)
        _, rest = script.communicate(timeout=90)
        assert script.returncode == 1
        assert "cluster: the control plane exited with status 137" in rest
        assert _group_gone(script.pid)
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)


def test_ctrl_c_drains_everything_and_exits_0() -> None:
    script = _start(_env(**_free_ports()))
    try:
        _read_banner(script, "Ctrl-C stops.")
        os.killpg(script.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        _, rest = script.communicate(timeout=90)
        assert script.returncode == 0, rest
        assert "control plane exited" not in rest
        assert _group_gone(script.pid)
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
