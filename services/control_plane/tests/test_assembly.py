"""The composition root: one engine, its endpoints and its upkeep, from one config; the
process and the test cluster both run what it builds."""

from __future__ import annotations

from fastworker import TaskRegistry, task
from fastworker_control_plane.app import ControlPlane
from fastworker_control_plane.assembly import Assembly, Pace
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.servers import registration, results, submission
from fastworker_protocol import Priority

registry = TaskRegistry()


@task(registry=registry)
def own_task() -> None:
    """A task of this process: opening the assembly must make it known."""


def test_the_board_and_the_workflow_book_take_their_settings_from_the_config() -> None:
    config = ControlPlaneConfig(
        result_ttl=7200.0, workflow_ttl=60.0, max_redeliveries=7, heartbeat_timeout=3.0
    )
    engine = Assembly(config, registry, instance_id="cp", clock=lambda: 1000.0).engine
    assert engine.board.config.result_ttl == 7200.0
    assert engine.board.config.max_redeliveries == 7
    assert engine.heartbeat_timeout == 3.0
    assert engine.clock() == 1000.0


async def test_opening_it_learns_the_tasks_and_returns_one_endpoint_per_socket() -> None:
    assembly = Assembly(ControlPlaneConfig(max_wait=5.0), registry, instance_id="cp")
    endpoints = assembly.open()
    try:
        assert list(endpoints.submission) == list(Priority.by_rank())
        assert {e.serves for e in endpoints.submission.values()} == {submission.SERVES}
        assert endpoints.results.serves == results.SERVES
        assert endpoints.registration.serves == registration.SERVES
        assert assembly.engine.board.known_task_names() == [own_task.name]
    finally:
        assembly.engine.close()


def test_the_control_plane_serves_the_engine_of_its_assembly_at_the_production_pace() -> None:
    plane = ControlPlane(ControlPlaneConfig(local_concurrency=0), registry)
    assert isinstance(plane.assembly, Assembly)
    assert plane.engine is plane.assembly.engine
    assert plane.assembly.pace == Pace()
