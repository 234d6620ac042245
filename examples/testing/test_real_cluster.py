"""The shop against real processes: a control plane and a subworker on loopback (the
``real_cluster`` fixture in conftest.py). Slower, and in real time: for what only real
processes show (the wire, the task modules as the workers import them, the commands)."""

from __future__ import annotations

from tasks import place_order

import fastworker
from fastworker import SyncClient


def test_an_order_is_charged_by_a_real_subworker(real_cluster: str) -> None:
    charge = place_order(7, 1250)

    assert fastworker.default_client().wait(charge, timeout=10) == "ch_7_1250"


def test_the_follow_up_waits_on_the_control_plane(real_cluster: str) -> None:
    place_order(8, 990)

    with SyncClient(real_cluster) as client:
        waiting = client.list_tasks(status="scheduled")
    assert "tasks.follow_up" in [t.name for t in waiting]
