"""The subworker's quick lane (``fastworker_subworker.quick_lane``) against a real control
plane over NNG: quick sync tasks are fetched, run and reported on one thread; a task that
turns out to block is handed to the thread pool, so the worker keeps its heartbeat and its
other slots; cancels and drains reach tasks wherever they run, and nothing is run twice."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from harness import wait_until

from fastworker import Client, TaskRegistry, signals, task
from fastworker.testing import free_port_block
from fastworker_control_plane.app import ControlPlane
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_protocol import PortMap, TaskState, WorkerState
from fastworker_subworker import Subworker, SubworkerConfig
from fastworker_subworker.metrics import subworker_registry

DEADLINE = 10.0
HEARTBEAT = 1.0  # the control plane's: a worker silent this long is dropped

registry = TaskRegistry()
runs: dict[int, int] = {}  # how often each ``count`` call ran
release = threading.Event()  # lets ``hold`` return


@task(registry=registry)
def count(key: int) -> int:
    runs[key] = runs.get(key, 0) + 1
    return key


@task(registry=registry)
def hold(seconds: float) -> float:
    """Quick unless asked to wait: then blocks until ``release`` (at most ``seconds``)."""
    if seconds:
        release.wait(seconds)
    return seconds


@task(registry=registry)
async def later(value: int) -> int:
    return value


@dataclass
class Setup:
    plane: ControlPlane
    worker: Subworker
    client: Client
    serving: asyncio.Task[None]  # the control plane's ``run``


@asynccontextmanager
async def lane_setup(concurrency: int = 2) -> AsyncIterator[Setup]:
    """A control plane running no tasks itself, and one subworker in this process dialing
    its registration port over TCP (so its link speaks NNG, and the lane can run)."""
    runs.clear()
    release.clear()
    config = ControlPlaneConfig(
        base_port=free_port_block(6),
        discovery_port=free_port_block(1),
        http_port=0,
        local_concurrency=0,
        heartbeat_timeout=HEARTBEAT,
    )
    plane = ControlPlane(config, registry)
    serving = asyncio.create_task(plane.run())
    address = f"tcp://127.0.0.1:{PortMap(config.base_port).registration}"
    worker = Subworker(
        SubworkerConfig(concurrency=concurrency, shutdown_timeout=2.0),
        registry,
        registration_address=address,
    )
    working = asyncio.create_task(worker.run())
    try:
        async with Client(
            f"tcp://127.0.0.1:{config.discovery_port}", timeout=DEADLINE, retries=0
        ) as client:
            await asyncio.wait_for(worker.wait_ready(), DEADLINE)
            yield Setup(plane, worker, client, serving)
    finally:
        release.set()
        worker.request_stop()
        await asyncio.wait_for(asyncio.gather(working, return_exceptions=True), DEADLINE)
        plane.request_stop()
        await asyncio.wait_for(asyncio.gather(serving, return_exceptions=True), DEADLINE)


async def warmed(setup: Setup, name: str = "count", *args: object) -> None:
    """Run ``name`` until the lane runs it: measured quick, then fetched by the lane."""

    async def on_lane() -> bool:
        before = setup.worker.quick_lane_runs
        await setup.client.submit_task(name, args=args or (0,))
        return setup.worker.quick_lane_runs > before

    await wait_until(on_lane, DEADLINE, f"{name} to run on the quick lane")


async def until(condition: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return condition()

    await wait_until(holds, DEADLINE, what)


async def test_quick_sync_tasks_run_on_the_lane_each_once_with_its_result() -> None:
    async with lane_setup() as setup:
        await warmed(setup)
        on_lane = setup.worker.quick_lane_runs
        ids = [await setup.client.delay("count", key) for key in range(1, 501)]
        results = await setup.client.wait_results(ids, timeout=DEADLINE)
        assert [r.result for r in results] == list(range(1, 501))
        assert all(runs[key] == 1 for key in range(1, 501))
        # Most of them on the lane (a task handed back or a race may take the pools)
        assert setup.worker.quick_lane_runs - on_lane > 400
        # And /metrics counts them
        registry = subworker_registry(setup.worker)
        counted = registry.get_sample_value("fastworker_subworker_quick_lane_tasks_total")
        assert counted == setup.worker.quick_lane_runs


async def test_a_task_the_lane_does_not_run_is_handed_to_the_pools_and_runs() -> None:
    async with lane_setup() as setup:
        await warmed(setup)
        # An async task, never run here before: the lane gives it back with the role
        result = await setup.client.submit_task("later", args=(7,))
        assert result.result == 7
        await warmed(setup)  # and the lane takes the role again afterwards


async def test_a_quick_task_that_blocks_keeps_the_worker_alive_and_its_other_slot_busy() -> None:
    async with lane_setup(concurrency=2) as setup:
        await warmed(setup, "hold", 0)
        # When a task measured quick blocks on the lane for several heartbeat timeouts
        stuck = await setup.client.delay("hold", 30.0)
        await until(lambda: setup.worker.in_flight == 1, "the blocked task to be detached")
        # Then the other slot still takes work meanwhile
        quick = await setup.client.submit_task("count", args=(1,), timeout=DEADLINE)
        assert quick.result == 1
        # And the worker is never dropped for silence, over several heartbeat timeouts
        loop = asyncio.get_running_loop()
        end = loop.time() + HEARTBEAT * 2.5
        while loop.time() < end:
            [info] = await setup.client.list_workers()
            assert info.worker_id == setup.worker.worker_id
            assert info.in_flight == 1
            await asyncio.sleep(0.1)  # between looks: the time passing is what is tested
        # And the blocked task, once it returns, is reported once, with its result
        release.set()
        assert await setup.client.wait(stuck, timeout=DEADLINE) == 30.0


async def test_a_cancel_reaches_a_blocked_task_that_started_on_the_lane() -> None:
    async with lane_setup() as setup:
        await warmed(setup, "hold", 0)
        stuck = await setup.client.delay("hold", 30.0)
        await until(lambda: setup.worker.in_flight == 1, "the blocked task to be detached")
        assert await setup.client.cancel_task(stuck)
        [result] = await setup.client.wait_results([stuck], timeout=DEADLINE)
        assert result.status == TaskState.CANCELLED
        # A sync task cannot be interrupted: it keeps its slot until it returns, and what
        # it returns then is dropped (the task stays cancelled)
        release.set()
        await until(lambda: setup.worker.in_flight == 0, "the cancelled task to return")
        [result] = await setup.client.wait_results([stuck], timeout=DEADLINE)
        assert result.status == TaskState.CANCELLED


async def test_a_stop_while_the_lane_holds_a_fetch_ends_promptly() -> None:
    async with lane_setup() as setup:
        await warmed(setup)
        await until(lambda: setup.worker.quick_lane_lent, "the lane to hold a fetch")
        started = time.monotonic()
        setup.worker.request_stop()
        await until(lambda: setup.worker.state == WorkerState.STOPPED, "the subworker to stop")
        # Not after the held fetch's wait and margin: the drain has the fetch answered
        assert time.monotonic() - started < 3.0


async def test_a_drain_gives_back_a_task_still_blocked_where_the_lane_started_it() -> None:
    async with lane_setup() as setup:
        await warmed(setup, "hold", 0)
        stuck = await setup.client.delay("hold", 30.0)
        await until(lambda: setup.worker.in_flight == 1, "the blocked task to be detached")
        # When the subworker drains while the task still blocks (shutdown_timeout 2 s)
        setup.worker.request_stop()
        await until(lambda: setup.worker.state == WorkerState.STOPPED, "the subworker to stop")
        # Then the control plane has it back, to run again elsewhere
        result = await setup.client.get_task_result(stuck)
        assert result is not None
        assert result.status == TaskState.QUEUED


async def test_after_the_control_plane_restarts_the_lane_serves_the_new_one() -> None:
    async with lane_setup() as setup:
        await warmed(setup)
        await until(lambda: setup.worker.quick_lane_lent, "the lane to hold a fetch")
        # When the control plane stops while the lane holds a fetch, and another starts on
        # the same ports (the subworker dials a fixed registration address here)
        config = setup.plane.config
        setup.plane.request_stop()
        await asyncio.wait_for(setup.serving, DEADLINE)
        plane = ControlPlane(config, registry)
        serving = asyncio.create_task(plane.run())
        try:
            # Then the subworker registers with it, and quick tasks run on the lane again
            async with Client(
                f"tcp://127.0.0.1:{config.discovery_port}", timeout=DEADLINE, retries=0
            ) as client:
                await until(lambda: setup.worker.registered, "the subworker to register again")
                moved = Setup(plane, setup.worker, client, serving)
                await warmed(moved)
                ids = [await client.delay("count", key) for key in range(1000, 1100)]
                results = await client.wait_results(ids, timeout=DEADLINE)
                assert [r.result for r in results] == list(range(1000, 1100))
        finally:
            plane.request_stop()
            await asyncio.wait_for(asyncio.gather(serving, return_exceptions=True), DEADLINE)


async def test_signal_handlers_run_on_the_lanes_thread_once_per_task() -> None:
    starts: list[tuple[str, str]] = []

    def started(run: signals.TaskRun) -> None:
        starts.append((run.id, threading.current_thread().name))

    signals.task_prerun.connect(started)
    try:
        async with lane_setup() as setup:
            await warmed(setup)
            on_lane = setup.worker.quick_lane_runs
            ids = [await setup.client.delay("count", key) for key in range(1, 51)]
            await setup.client.wait_results(ids, timeout=DEADLINE)
            assert setup.worker.quick_lane_runs > on_lane
    finally:
        signals.task_prerun.disconnect(started)
    threads = dict(starts)
    assert sorted(task_id for task_id, _ in starts if task_id in ids) == sorted(ids)  # once each
    assert "fastworker-lane" in {threads[i] for i in ids}
