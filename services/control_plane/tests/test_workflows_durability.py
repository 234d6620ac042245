"""The workflow book across a crash: its records (changes, snapshot) rebuild it exactly,
and what it asked for that may not have been done is asked again, idempotently.

``Crashable`` journals the book's changes after every call (as the engine will, in the
same commit as the board's transitions) and restarts from the journal, encoded and
decoded as msgpack like the file; its board keeps what it holds across the crash."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from workflow_kit import NOW, Run, chord, step

from fastworker_control_plane.core.workflow_records import (
    StepOutcome,
    WorkflowDefined,
    WorkflowRecord,
)
from fastworker_control_plane.core.workflows import Actions, WorkflowBook
from fastworker_protocol import TaskSpec, TaskState
from fastworker_protocol.workflows import Feed, OnFailure, SubmitWorkflow, WorkflowState

_decoder = msgspec.msgpack.Decoder(list[WorkflowRecord])


def through_msgpack(records: list[WorkflowRecord]) -> list[WorkflowRecord]:
    return _decoder.decode(msgspec.msgpack.encode(records))


def image(book: WorkflowBook) -> bytes:
    return msgspec.msgpack.encode(book.snapshot())


class Crashable(Run):
    def __init__(self, **bounds: Any) -> None:
        super().__init__(WorkflowBook(**bounds))
        self.bounds = bounds
        self.journal: list[WorkflowRecord] = []

    def act(self, actions: Actions) -> None:
        """As the engine will: the board ignores a task id it holds, and a final result it
        holds for one is passed back to the book, as if the task had just ended. The
        decision's records are journaled first, those of the decisions it leads to after."""
        self.journal += actions.records
        again = [self.results[s.id] for s, _ in actions.release if s.id in self.results]
        again += [self.results[task_id] for task_id in actions.cancel if task_id in self.results]
        held = self.queued.keys() | self.results.keys()
        fresh = [(s, p) for s, p in actions.release if s.id not in held]
        super().act(Actions(fresh, actions.cancel, actions.ended))
        for final in again:
            self.act(self.book.finished(final, self.now))

    def compact(self) -> None:
        """Replace the journal with a snapshot."""
        self.journal = self.book.snapshot()

    def restart(self, now: float = NOW, records: list[WorkflowRecord] | None = None) -> Actions:
        """A new book from the journal, its outstanding actions done."""
        self.book = WorkflowBook(**self.bounds)
        outstanding = self.book.restore(through_msgpack(records or self.journal), now)
        self.now = now
        self.act(outstanding)
        return outstanding


def test_a_book_restored_from_its_changes_is_the_book_that_wrote_them() -> None:
    run = Crashable()
    wf = run.submit(chord(20), link=[TaskSpec(name="l")])
    other = run.submit([step("a"), step("b", after=[0])], on_failure=OnFailure.CONTINUE)
    for i in range(0, 20, 2):
        run.succeed(f"{wf}.{i}", i)
    run.fail(f"{other}.0")
    before = image(run.book)

    run.restart()
    assert image(run.book) == before
    assert run.book.live_bytes > 0


def test_a_book_restored_from_a_snapshot_and_later_changes_is_the_same() -> None:
    run = Crashable()
    wf = run.submit(chord(20))
    for i in range(10):
        run.succeed(f"{wf}.{i}", i)
    run.compact()
    for i in range(10, 15):
        run.succeed(f"{wf}.{i}", i)
    before = image(run.book)

    run.restart()
    assert image(run.book) == before


def test_a_restored_result_is_let_go_once_its_last_consumer_ended() -> None:
    # Given a result fed to two children, one of which ended before a compaction
    run = Crashable()
    wf = run.submit(
        [
            step("a"),
            step("b", after=[0], feed=Feed.ONE),
            step("c", after=[0], feed=Feed.ONE),
            step("d", after=[2]),  # keeps the workflow running
        ]
    )
    run.succeed(f"{wf}.0", "A")
    run.succeed(f"{wf}.1")
    run.compact()
    run.restart()
    assert run.book.snapshot()[1].results == {0: "A"}  # type: ignore[union-attr]
    # When the other ends, the result is let go
    run.succeed(f"{wf}.2")
    assert f"{wf}.3" in run.queued
    assert run.book.snapshot()[1].results == {}  # type: ignore[union-attr]


def test_records_applied_twice_change_nothing() -> None:
    run = Crashable()
    wf = run.submit(chord(5))
    run.succeed(f"{wf}.0", 0)
    run.act(run.book.cancel(wf, NOW))
    before = image(run.book)

    run.restart(records=run.book.snapshot() + run.journal + run.journal)
    assert image(run.book) == before


def test_a_crash_mid_chord_of_1000_runs_the_callback_once_with_every_result() -> None:
    # Given a chord of 1,000 with 600 parents done when the control plane dies
    run = Crashable()
    wf = run.submit(chord(1000), workflow_id="big")
    for i in range(600):
        run.succeed(f"{wf}.{i}", i * 2)
    # When it restarts from its journal
    outstanding = run.restart(NOW + 1)
    # Then the 400 unfinished parents are asked for again (the board holds them already)
    assert sorted(spec.id for spec, _ in outstanding.release) == sorted(
        f"{wf}.{i}" for i in range(600, 1000)
    )
    for i in range(600, 1000):
        run.succeed(f"{wf}.{i}", i * 2)
    # and the callback is queued once, fed every result in order
    assert run.released[f"{wf}.1000"] == 1
    assert run.queued[f"{wf}.1000"].args == [[i * 2 for i in range(1000)]]
    run.succeed(f"{wf}.1000")
    assert run.state(wf) == WorkflowState.SUCCESS


def test_a_callback_whose_parents_all_ended_before_the_crash_is_queued_on_restore() -> None:
    # Given every parent's outcome journaled, but the callback never reached the board
    run = Crashable()
    wf = run.submit(chord(1000))
    for i in range(1000):
        run.succeed(f"{wf}.{i}", -i)
    del run.queued[f"{wf}.1000"]
    run.released.clear()
    # When the control plane restarts, the callback is queued, fed every result
    run.restart()

    assert run.released[f"{wf}.1000"] == 1
    assert run.queued[f"{wf}.1000"].args == [[-i for i in range(1000)]]


def test_a_step_the_board_finished_unjournaled_is_taken_from_the_board_on_restore() -> None:
    # Given step 0's success reached the board's journal but not the book's
    run = Crashable()
    wf = run.submit([step("a"), step("b", after=[0], feed=Feed.ONE)])
    journal = list(run.journal)
    run.succeed(f"{wf}.0", "A")
    # When it restarts, the board's final result is passed back and step 1 goes on
    run.restart(records=journal)

    assert f"{wf}.1" in run.queued
    assert run.steps(wf)[0] == TaskState.SUCCESS


def test_open_links_are_queued_again_and_ended_ones_are_not() -> None:
    run = Crashable()
    wf = run.submit([step("a")], link=[TaskSpec(name="l1"), TaskSpec(name="l2")])
    run.succeed(f"{wf}.0", "A")
    run.succeed(f"{wf}.link-0")

    outstanding = run.restart()
    assert outstanding.release == [
        (TaskSpec(name="l2", id=f"{wf}.link-1", args=[["A"]]), outstanding.release[0][1])
    ]
    run.succeed(f"{wf}.link-1")
    assert run.restart().release == []


def test_steps_of_a_cancelled_workflow_are_cancelled_again_on_restore() -> None:
    run = Crashable()
    wf = run.submit([step("a"), step("b")])
    journal = list(run.journal)
    journal += run.book.cancel(wf, NOW).records  # the board never heard of it

    outstanding = run.restart(records=journal)
    assert sorted(outstanding.cancel) == [f"{wf}.0", f"{wf}.1"]
    assert run.final == {f"{wf}.0": TaskState.CANCELLED, f"{wf}.1": TaskState.CANCELLED}
    assert run.steps(wf) == [TaskState.CANCELLED, TaskState.CANCELLED]


def test_an_evicted_workflow_accepted_again_is_restored_as_the_new_one() -> None:
    run = Crashable(ttl=10.0)
    run.submit([step()], workflow_id="w")
    run.run_all()
    run.now = NOW + 20
    run.submit([step(), step()], workflow_id="w")

    run.restart(NOW + 20)
    info = run.book.info("w")
    assert info is not None
    assert (len(info.steps), info.state, info.submitted_at) == (2, WorkflowState.RUNNING, NOW + 20)


def test_final_workflows_past_their_ttl_are_not_restored() -> None:
    run = Crashable(ttl=10.0)
    run.submit([step()], workflow_id="w")
    run.run_all()

    run.restart(NOW + 10)
    assert "w" not in run.book


def test_the_journal_holds_a_result_only_while_it_is_needed() -> None:
    run = Crashable()
    wf = run.submit([step("a"), step("b", after=[0], feed=Feed.ONE), step("c")])
    run.succeed(f"{wf}.0", "needed")
    run.succeed(f"{wf}.2", "not needed")

    outcomes = [r for r in run.journal if isinstance(r, StepOutcome)]
    assert [(o.step, o.result) for o in outcomes] == [(0, "needed"), (2, None)]


def test_restore_needs_an_empty_book() -> None:
    book = WorkflowBook()
    book.accept(SubmitWorkflow(steps=[step()]), NOW)

    with pytest.raises(ValueError, match="empty book"):
        book.restore([], NOW)


def test_a_decision_returns_its_own_records_and_no_other() -> None:
    book = WorkflowBook()
    accepted = book.accept(SubmitWorkflow(steps=[step()], workflow_id="w"), NOW)

    assert [type(r) for r in accepted.records] == [WorkflowDefined]
    again = book.accept(SubmitWorkflow(steps=[step()], workflow_id="w"), NOW)
    assert again.records == []  # known already: nothing new to journal
