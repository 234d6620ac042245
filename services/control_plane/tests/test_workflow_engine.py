"""Workflows on the real engine (issue 21): the book wired to the board, a journal, the
submission and results handlers. A fake subworker fetches and reports in-process."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fastworker import TaskRegistry
from fastworker_control_plane.app import ControlPlane
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.durability.entries import snapshot
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.servers.results import ResultsHandler
from fastworker_control_plane.servers.submission import SubmissionHandler
from fastworker_protocol import (
    ErrorCode,
    Outcome,
    Param,
    Priority,
    TaskError,
    TaskSignature,
    TaskSpec,
    TaskState,
)
from fastworker_protocol.workflows import (
    CancelWorkflow,
    Feed,
    GetWorkflow,
    OnFailure,
    SubmitWorkflow,
    WorkflowInfo,
    WorkflowState,
    WorkflowStep,
)

NOW = 1000.0


def _params(*names: str) -> list[Param]:
    return [Param(name=n, kind="POSITIONAL_OR_KEYWORD") for n in names]


SIGNATURES = [
    TaskSignature(name="add", params=_params("a", "b")),
    TaskSignature(name="collect", params=_params("values")),
    TaskSignature(name="boom", params=[]),
    TaskSignature(name="hang", params=[]),
]


def _run(name: str, args: list[Any]) -> Outcome | None:
    """What the fake subworker does with a task: ``None`` leaves it running."""
    if name == "add":
        return Outcome(task_id="", ok=True, result=args[0] + args[1])
    if name == "collect":
        return Outcome(task_id="", ok=True, result=args[0])
    if name == "boom":
        return Outcome(task_id="", ok=False, error=TaskError(type="ValueError", message="boom"))
    return None


class Worker:
    """Registers every task, runs what it is handed at once (``hang`` never ends)."""

    def __init__(self, engine: Engine, worker_id: str = "w", concurrency: int = 5000) -> None:
        self.engine = engine
        self.worker_id = worker_id
        self.runs: Counter[str] = Counter()  # deliveries by task id
        self.results: dict[str, Any] = {}
        engine.register(worker_id, "fake", concurrency, SIGNATURES, -1, local=False)

    async def drain(self, until: Callable[[], bool] = lambda: False) -> None:
        """Fetch and report until nothing more comes (or ``until()``)."""
        while not until():
            delivery = await self.engine.fetch(self.worker_id, 0.05)
            if not delivery.tasks:
                return
            outcomes = []
            for task in delivery.tasks:
                self.runs[task.id] += 1
                outcome = _run(task.name, task.args)
                if outcome is not None:
                    outcomes.append(
                        Outcome(
                            task_id=task.id,
                            ok=outcome.ok,
                            result=outcome.result,
                            error=outcome.error,
                        )
                    )
                    self.results[task.id] = outcome.result
            self.engine.report(self.worker_id, [t.id for t in delivery.tasks], outcomes)


def step(
    name: str, *args: Any, after: list[int] | None = None, feed: Feed = Feed.NONE
) -> WorkflowStep:
    return WorkflowStep(task=TaskSpec(name=name, args=list(args)), after=after or [], feed=feed)


def chord(count: int) -> list[WorkflowStep]:
    parents = [step("add", i, 0) for i in range(count)]
    return [*parents, step("collect", after=list(range(count)), feed=Feed.ALL)]


def engine() -> Engine:
    return Engine(TaskBoard(), heartbeat_timeout=60, clock=lambda: NOW)


def state(engine: Engine, workflow_id: str) -> WorkflowInfo:
    return engine.workflows.info(workflow_id)


async def test_a_chain_of_three_passes_each_result_on() -> None:
    # Given an engine and a subworker
    cp = engine()
    worker = Worker(cp)
    # When a chain add(1, 2) -> add(_, 10) -> add(_, 100) runs
    steps = [
        step("add", 1, 2),
        step("add", 10, after=[0], feed=Feed.ONE),
        step("add", 100, after=[1], feed=Feed.ONE),
    ]
    accepted = cp.workflows.submit(SubmitWorkflow(workflow_id="c", steps=steps))
    await worker.drain()
    # Then each step got the previous result, and the workflow succeeded
    assert accepted.task_ids == ["c.0", "c.1", "c.2"]
    assert [worker.results[t] for t in accepted.task_ids] == [3, 13, 113]
    assert state(cp, "c").state == WorkflowState.SUCCESS
    assert cp.workflows.outcomes["success"] == 1


async def test_a_chord_of_1000_releases_its_callback_once_with_every_result_in_order() -> None:
    cp = engine()
    worker = Worker(cp)
    cp.workflows.submit(SubmitWorkflow(workflow_id="k", steps=chord(1000)))
    await worker.drain()
    assert worker.runs["k.1000"] == 1
    assert worker.results["k.1000"] == list(range(1000))
    assert state(cp, "k").state == WorkflowState.SUCCESS


@pytest.mark.parametrize(
    ("on_failure", "other"), [(OnFailure.CANCEL, "cancelled"), (OnFailure.CONTINUE, "success")]
)
async def test_a_failing_step_cancels_the_rest_or_lets_independent_branches_finish(
    on_failure: OnFailure, other: str
) -> None:
    # Given a workflow of a failing step, a step after it, and an independent step that
    # is still running when the failure comes
    cp = engine()
    worker = Worker(cp)
    steps = [step("boom"), step("add", 1, 1, after=[0]), step("hang")]
    cp.workflows.submit(SubmitWorkflow(workflow_id="f", steps=steps, on_failure=on_failure))
    await worker.drain()
    info = state(cp, "f")
    # Then the failed step's child never runs
    assert [s.state for s in info.steps[:2]] == ["failure", "skipped"]
    if on_failure == OnFailure.CANCEL:  # the running step is cancelled, the workflow ends
        assert info.steps[2].state == "cancelled"
        assert info.state == WorkflowState.FAILURE
    else:  # it runs on, and the workflow waits for it
        assert info.steps[2].state == "running"
        assert info.state == WorkflowState.RUNNING
        cp.report("w", [], [Outcome(task_id="f.2", ok=True, result=None)])
        assert state(cp, "f").state == WorkflowState.FAILURE
    assert worker.runs["f.1"] == 0
    del other


async def test_cancel_workflow_cancels_running_steps_and_skips_waiting_ones() -> None:
    cp = engine()
    worker = Worker(cp)
    steps = [step("hang"), step("add", 1, 1, after=[0])]
    cp.workflows.submit(SubmitWorkflow(workflow_id="x", steps=steps))
    await worker.drain()
    handler = ResultsHandler(cp, max_wait=5)
    reply = await handler(CancelWorkflow(workflow_id="x"), -1)
    again = await handler(CancelWorkflow(workflow_id="x"), -1)
    info = state(cp, "x")
    assert (reply.cancelled, again.cancelled) == (True, False)  # type: ignore[attr-defined]
    assert info.state == WorkflowState.CANCELLED
    assert [s.state for s in info.steps] == ["cancelled", "skipped"]
    assert cp.board.get("x.0", NOW).status == TaskState.CANCELLED  # type: ignore[union-attr]


async def test_a_held_get_workflow_is_answered_when_the_workflow_ends() -> None:
    cp = engine()
    worker = Worker(cp)
    cp.workflows.submit(SubmitWorkflow(workflow_id="h", steps=chord(10)))
    handler = ResultsHandler(cp, max_wait=30)
    held = asyncio.create_task(handler(GetWorkflow(workflow_id="h", wait=30), -1))
    await asyncio.sleep(0)
    assert not held.done()
    await worker.drain()
    info = await asyncio.wait_for(held, 5)
    assert isinstance(info, WorkflowInfo)
    assert info.state == WorkflowState.SUCCESS


async def test_a_cycle_or_an_unknown_task_is_refused_and_nothing_is_queued() -> None:
    cp = engine()
    Worker(cp)
    handler = SubmissionHandler(cp, Priority.NORMAL, max_wait=5)
    cycle = [step("add", 1, 1, after=[1]), step("add", 1, 1, after=[0])]
    unknown = [step("add", 1, 1), step("nope", after=[0])]
    with pytest.raises(Rejected) as refused:
        await handler(SubmitWorkflow(steps=cycle), -1)
    assert refused.value.code == ErrorCode.INVALID_MESSAGE
    with pytest.raises(Rejected) as refused:
        await handler(SubmitWorkflow(steps=unknown), -1)
    assert refused.value.code == ErrorCode.UNKNOWN_TASK
    assert len(cp.board) == 0
    assert len(cp.workflows.book) == 0


# --- the journal ------------------------------------------------------------------------


async def durable_engine(directory: Path) -> tuple[Engine, Journal]:
    """An engine on the journal in ``directory``, recovered as the control plane does."""
    cp = engine()
    journal = Journal(directory)
    recovered = journal.load().recovered
    recovered.restore(cp.board, NOW)
    book = cp.workflows.book
    outstanding = book.restore(recovered.workflows, NOW)
    journal.start(lambda: [*snapshot(cp.board, NOW), *book.snapshot()])
    cp.keep_journal(journal)
    cp.workflows.carry_out(outstanding)
    return cp, journal


async def test_a_journal_replayed_mid_chord_releases_the_callback_exactly_once(
    tmp_path: Path,
) -> None:
    # Given a durable engine half way through a chord of 100
    first, journal = await durable_engine(tmp_path)
    worker = Worker(first, concurrency=10)
    first.workflows.submit(SubmitWorkflow(workflow_id="j", steps=chord(100)))
    await first.outbox.durable()

    def half() -> bool:
        return sum(worker.results.get(f"j.{i}") is not None for i in range(100)) >= 50

    await worker.drain(until=half)
    ran = len(worker.results)
    await first.outbox.durable()
    await journal.close()
    # When a new engine replays the journal and a subworker runs what is left
    second, journal = await durable_engine(tmp_path)
    again = Worker(second)
    await again.drain()
    # Then the callback ran once, fed every result in order
    assert 50 <= ran < 100  # the callback was not released yet
    assert again.runs["j.100"] + worker.runs["j.100"] == 1
    assert again.results["j.100"] == list(range(100))
    assert state(second, "j").state == WorkflowState.SUCCESS
    await second.outbox.durable()
    await journal.close()
    # And a third start finds it final, releasing nothing
    third, journal = await durable_engine(tmp_path)
    assert state(third, "j").state == WorkflowState.SUCCESS
    assert len(third.board) == 0
    await journal.close()


async def test_a_compacted_journal_keeps_running_workflows_and_their_kept_results(
    tmp_path: Path,
) -> None:
    # Given a chord half done on a durable engine, and the journal compacted to a snapshot
    first, journal = await durable_engine(tmp_path)
    worker = Worker(first, concurrency=5)
    first.workflows.submit(SubmitWorkflow(workflow_id="s", steps=chord(20)))
    await worker.drain(until=lambda: len(worker.results) >= 10)
    await first.outbox.durable()
    journal.rewrite([*snapshot(first.board, NOW), *first.workflows.book.snapshot()])
    await journal.close()
    # When a new engine starts from it and runs the rest
    second, journal = await durable_engine(tmp_path)
    again = Worker(second)
    await again.drain()
    # Then the callback runs once with every result, those from before the snapshot too
    assert again.results["s.20"] == list(range(20))
    assert again.runs["s.20"] + worker.runs["s.20"] == 1
    await journal.close()


async def test_link_runs_on_success_fed_the_final_results_and_link_error_on_failure() -> None:
    cp = engine()
    worker = Worker(cp)
    collect = TaskSpec(name="collect")
    cp.workflows.submit(
        SubmitWorkflow(
            workflow_id="ok", steps=[step("add", 1, 1), step("add", 2, 2)], link=[collect]
        )
    )
    cp.workflows.submit(
        SubmitWorkflow(workflow_id="ko", steps=[step("boom")], link_error=[collect])
    )
    await worker.drain()
    assert worker.results["ok.link-0"] == [2, 4]
    assert worker.results["ko.link_error-0"] == "ko"
    assert cp.workflows.outcomes == {"success": 1, "failure": 1}


async def test_released_steps_are_not_bounded_by_max_queued() -> None:
    # Given a board that takes 5 live tasks per priority
    cp = Engine(TaskBoard(BoardConfig(max_queued=5)), heartbeat_timeout=60, clock=lambda: NOW)
    worker = Worker(cp)
    # When a chord of 20 is accepted, then all of it runs
    cp.workflows.submit(SubmitWorkflow(workflow_id="big", steps=chord(20)))
    await worker.drain()
    assert worker.results["big.20"] == list(range(20))


async def test_a_step_silent_past_its_time_limit_fails_its_workflow() -> None:
    # Given a step with a time limit that its subworker never reports
    now = [NOW]
    cp = Engine(TaskBoard(), heartbeat_timeout=60, clock=lambda: now[0])
    worker = Worker(cp)
    hang = WorkflowStep(task=TaskSpec(name="hang", time_limit=1.0))
    cp.workflows.submit(SubmitWorkflow(workflow_id="t", steps=[hang, step("add", 1, 1, after=[0])]))
    await worker.drain()
    # When upkeep finds it overdue
    now[0] += 3600
    cp.maintain()
    # Then the workflow failed and its second step never ran
    info = state(cp, "t")
    assert info.state == WorkflowState.FAILURE
    assert [s.state for s in info.steps] == ["failure", "skipped"]


async def test_a_fed_result_too_large_to_dispatch_fails_the_step_it_feeds() -> None:
    # Given a board whose messages are 64 KiB
    board = TaskBoard(BoardConfig(max_message_size=64 * 1024))
    cp = Engine(board, heartbeat_timeout=60, clock=lambda: NOW)
    worker = Worker(cp)
    half = "x" * 25_000
    steps = [step("add", half, half), step("add", half, after=[0], feed=Feed.ONE)]
    # When the first step's result (50 kB) is fed to the second (75 kB in all, over the limit)
    cp.workflows.submit(SubmitWorkflow(workflow_id="big", steps=steps))
    await worker.drain()
    # Then that step fails without running, and so does the workflow
    info = state(cp, "big")
    assert [s.state for s in info.steps] == ["success", "failure"]
    assert info.state == WorkflowState.FAILURE
    assert worker.runs["big.1"] == 0


async def test_a_held_get_workflow_is_refused_when_the_control_plane_stops() -> None:
    cp = engine()
    Worker(cp)
    cp.workflows.submit(SubmitWorkflow(workflow_id="s", steps=[step("hang")]))
    held = asyncio.create_task(
        ResultsHandler(cp, max_wait=30)(GetWorkflow(workflow_id="s", wait=30), -1)
    )
    await asyncio.sleep(0)
    cp.close()
    with pytest.raises(Rejected) as refused:
        await held
    assert refused.value.code == ErrorCode.SHUTTING_DOWN


async def test_the_control_plane_restores_workflows_from_its_state_dir(tmp_path: Path) -> None:
    # Given a journal left half way through a chord
    first, journal = await durable_engine(tmp_path)
    worker = Worker(first, concurrency=4)
    first.workflows.submit(SubmitWorkflow(workflow_id="cp", steps=chord(12)))
    await worker.drain(until=lambda: len(worker.results) >= 6)
    await first.outbox.durable()
    await journal.close()
    # When a control plane starts on that state dir (its recovery alone: no sockets)
    config = ControlPlaneConfig(state_dir=str(tmp_path), http_port=0, local_concurrency=0)
    plane = ControlPlane(config, TaskRegistry(), clock=lambda: NOW)
    try:
        plane._recover()
        again = Worker(plane.engine)
        await again.drain()
        # Then the workflow finishes, its callback run once with every result
        assert again.results["cp.12"] == list(range(12))
        assert state(plane.engine, "cp").state == WorkflowState.SUCCESS
    finally:
        await plane.close()
