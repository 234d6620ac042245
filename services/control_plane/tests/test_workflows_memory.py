"""What the workflow book holds: results only while a consumer needs them, final
workflows evicted by count, age and bytes, running ones bounded by refusing new ones."""

from __future__ import annotations

import pytest
from workflow_kit import NOW, Run, chain, chord, step

from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.workflow_records import WorkflowProgress
from fastworker_control_plane.core.workflows import WorkflowBook
from fastworker_protocol import ErrorCode, TaskSpec
from fastworker_protocol.workflows import Feed, SubmitWorkflow, WorkflowState


def held(book: WorkflowBook, workflow_id: str) -> dict[int, object]:
    """The results the book keeps for ``workflow_id``, by step."""
    for record in book.snapshot():
        if isinstance(record, WorkflowProgress) and record.workflow_id == workflow_id:
            return record.results
    raise AssertionError(f"{workflow_id} is not held")


def test_a_result_is_kept_until_the_step_fed_from_it_has_ended() -> None:
    run = Run()
    wf = run.submit(chain(3))

    run.succeed(f"{wf}.0", "zero")
    assert held(run.book, wf) == {0: "zero"}
    run.succeed(f"{wf}.1", "one")
    assert held(run.book, wf) == {1: "one"}  # 0's consumer ended
    run.succeed(f"{wf}.2", "two")
    assert held(run.book, wf) == {}


def test_results_nobody_is_fed_are_not_kept() -> None:
    run = Run()
    wf = run.submit([step("a"), step("b", after=[0]), step("c")])
    run.succeed(f"{wf}.0", "x" * 1000)
    run.succeed(f"{wf}.2", "y" * 1000)

    assert held(run.book, wf) == {}


def test_a_chord_keeps_its_parents_results_until_the_callback_ended() -> None:
    run = Run()
    wf = run.submit(chord(10))
    for i in range(10):
        run.succeed(f"{wf}.{i}", i)
    assert held(run.book, wf) == {i: i for i in range(10)}

    run.succeed(f"{wf}.10", 45)
    assert held(run.book, wf) == {}


def test_final_steps_results_are_kept_until_the_links_ended() -> None:
    run = Run()
    wf = run.submit([step("a"), step("b")], link=[TaskSpec(name="l1"), TaskSpec(name="l2")])
    run.succeed(f"{wf}.0", "A")
    run.succeed(f"{wf}.1", "B")
    assert held(run.book, wf) == {0: "A", 1: "B"}

    run.succeed(f"{wf}.link-0")
    assert held(run.book, wf) == {0: "A", 1: "B"}
    run.succeed(f"{wf}.link-1")
    assert held(run.book, wf) == {}


def test_a_failure_lets_go_of_every_kept_result() -> None:
    run = Run()
    wf = run.submit(chord(3), link=[TaskSpec(name="l")])
    run.succeed(f"{wf}.0", "kept")
    assert held(run.book, wf) == {0: "kept"}
    run.fail(f"{wf}.1")

    assert held(run.book, wf) == {}


def test_ended_steps_let_go_of_their_arguments() -> None:
    run = Run()
    wf = run.submit([step("add", "x" * 10_000, 1)])
    before = run.book.live_bytes
    assert before > 10_000

    run.succeed(f"{wf}.0")
    assert run.book.live_bytes == 0
    assert run.book.finished_bytes < before - 10_000
    defined = run.book.snapshot()[0]
    assert defined.steps[0].task.args == []  # type: ignore[union-attr]


def test_kept_results_count_in_the_bytes_of_running_workflows() -> None:
    run = Run()
    wf = run.submit(chain(2))
    before = run.book.live_bytes

    run.succeed(f"{wf}.0", "r" * 5000)
    assert run.book.live_bytes > before + 5000


def test_final_workflows_past_max_finished_are_evicted_oldest_first() -> None:
    run = Run(WorkflowBook(max_finished=2))
    for name in ("w1", "w2", "w3"):
        run.submit([step()], workflow_id=name)
        run.run_all()

    assert "w1" not in run.book
    assert "w2" in run.book
    assert "w3" in run.book
    assert run.book.evicted == 1


def test_final_workflows_are_evicted_ttl_seconds_after_they_ended() -> None:
    run = Run(WorkflowBook(ttl=10.0))
    run.submit([step()], workflow_id="w1")
    run.run_all()

    assert run.book.sweep(NOW + 9.99) == 0
    assert run.book.sweep(NOW + 10.0) == 1
    assert run.book.info("w1") is None
    assert run.book.finished_bytes == 0


def test_final_workflows_past_max_bytes_are_evicted_but_the_newest_stays() -> None:
    run = Run(WorkflowBook(max_bytes=1))
    run.submit([step()], workflow_id="w1")
    run.run_all()
    assert "w1" in run.book  # alone past the bound: kept

    run.submit([step()], workflow_id="w2")
    run.run_all()
    assert "w1" not in run.book
    assert "w2" in run.book


def test_running_workflows_are_never_evicted() -> None:
    run = Run(WorkflowBook(max_finished=1, ttl=1.0, max_bytes=1))
    run.submit([step()], workflow_id="live")
    run.submit([step()], workflow_id="done")
    run.succeed("done.0")

    assert run.book.sweep(NOW + 3600) == 1
    assert run.book.info("live").state == WorkflowState.RUNNING  # type: ignore[union-attr]


def test_an_evicted_workflow_id_accepted_again_runs_again() -> None:
    run = Run(WorkflowBook(ttl=10.0))
    run.submit([step()], workflow_id="w")
    run.run_all()
    run.book.sweep(NOW + 10)

    accepted = run.book.accept(SubmitWorkflow(steps=[step()], workflow_id="w"), NOW + 10)
    assert [spec.id for spec, _ in accepted.release] == ["w.0"]


def test_new_workflows_are_refused_while_running_ones_hold_too_many_bytes() -> None:
    run = Run(WorkflowBook(max_live_bytes=4000))
    run.submit([step("add", "x" * 3000)], workflow_id="big")  # alone: always accepted

    with pytest.raises(Rejected, match="retry later") as raised:
        run.submit([step("add", "y" * 3000)], workflow_id="more")
    assert raised.value.code == ErrorCode.QUEUE_FULL
    assert "more" not in run.book

    run.run_all()
    run.submit([step("add", "y" * 3000)], workflow_id="more")


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        WorkflowBook(max_finished=0)


def test_a_chord_callback_fed_many_results_is_counted_in_them() -> None:
    run = Run()
    wf = run.submit([step("a"), step("tsum", after=[0], feed=Feed.ALL)])
    run.succeed(f"{wf}.0", list(range(1000)))

    assert run.queued[f"{wf}.1"].args == [[list(range(1000))]]
    assert run.book.live_bytes > 1000
