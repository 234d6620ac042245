"""The benchmark loses no run to a port race: a cluster whose picked port was taken
between the pick and its bind is started again on fresh ports."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.cluster import Cluster, started
from bench.procs import Supervisor


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[Supervisor]:
    supervisor = Supervisor(tmp_path)
    try:
        yield supervisor
    finally:
        supervisor.stop_all()


async def test_a_cluster_whose_port_was_taken_is_started_again_on_fresh_ports(
    supervisor: Supervisor,
) -> None:
    # Given a first cluster whose submission port another server took after the pick
    first = Cluster(supervisor)
    made: list[Cluster] = []

    def make() -> Cluster:
        made.append(Cluster(supervisor) if made else first)
        return made[-1]

    async def start(cluster: Cluster, state: Path) -> None:
        cluster.start_control_plane(1)

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", first.base_port))
        squatter.listen()

        # When it is started
        async with started(make, start, "fastworker-bench-test-") as (cluster, client):
            # Then a second cluster, on other ports, runs the tasks
            assert made == [first, cluster]
            assert cluster.base_port != first.base_port
            assert (await client.submit_task("add", args=(2, 3))).result == 5
    assert "already in use" in _first_log(supervisor)


def _first_log(supervisor: Supervisor) -> str:
    return sorted(supervisor.log_dir.glob("*.log"))[0].read_text()
