"""The harness loses no test to a port race: a control plane whose picked port was taken
between the pick and its bind starts again on fresh ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from harness import Cluster

from fastworker.testing import free_port_block

pytestmark = pytest.mark.integration


def _logs(where: Path) -> list[tuple[Path, str]]:
    return [(log, log.read_text()) for log in where.glob("control-plane-*.log")]


async def test_a_control_plane_whose_picked_port_was_taken_starts_again_on_fresh_ones(
    tmp_path: Path,
) -> None:
    # Given a cluster whose first submission port some other server took after the pick
    cluster = Cluster(tmp_path)
    taken = cluster.base_port
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", taken))
            squatter.listen()

            # When its control plane starts
            proc = cluster.control_plane()

            # Then it runs, on other ports, and serves tasks there
            assert proc.popen.poll() is None, proc.output()
            assert cluster.base_port != taken
            [lost] = [text for log, text in _logs(tmp_path) if log != proc.log]
            assert "already in use" in lost
            async with cluster.client() as client:
                assert (await client.submit_task("add", args=(2, 3))).result == 5
    finally:
        cluster.stop()


async def test_a_port_the_test_chose_is_not_changed_behind_its_back(tmp_path: Path) -> None:
    # Given a test that chose the HTTP port itself, and a server already on it
    cluster = Cluster(tmp_path)
    try:
        with socket.socket() as squatter:
            ours = {*range(cluster.base_port, cluster.base_port + 6), cluster.discovery_port}
            squatter.bind(("127.0.0.1", free_port_block(avoid=ours)))
            squatter.listen()
            port = squatter.getsockname()[1]

            # When the control plane is started there
            proc = cluster.control_plane("--http-port", str(port))

            # Then it fails as the test asked for, once
            assert proc.wait(30) == 2
            assert len(cluster.procs) == 1
    finally:
        cluster.stop()
