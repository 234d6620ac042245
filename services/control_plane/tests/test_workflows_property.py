"""Random workflows, random outcomes, random crashes: whatever happens, a step is released
at most once, only once all its parents succeeded, fed their results; a restored book is
the book that crashed, and goes on exactly as a book that never crashed (a shadow told
the same results); and every workflow ends as its steps say."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_workflows_durability import Crashable, image, through_msgpack
from workflow_kit import NOW, step

from fastworker_control_plane.core.workflow_records import parse_step
from fastworker_control_plane.core.workflows import Actions, WorkflowBook
from fastworker_protocol import TaskResult, TaskSpec, TaskState
from fastworker_protocol.workflows import (
    Feed,
    OnFailure,
    StepState,
    SubmitWorkflow,
    WorkflowState,
    WorkflowStep,
)

SUCCEED, FAIL, CANCEL_STEP, CANCEL, CRASH, COMPACT = range(6)
# Successes are likelier, so that workflows get deep before something fails.
OPERATIONS = st.sampled_from([SUCCEED] * 6 + [FAIL, CANCEL_STEP, CANCEL, CRASH, COMPACT])


@st.composite
def workflows(draw: st.DrawFn) -> SubmitWorkflow:
    """A DAG of up to 10 steps, numbered in a random order (parents may come later)."""
    count = draw(st.integers(1, 10))
    order = draw(st.permutations(range(count)))  # order[k]: the index of the k-th in topo order
    steps: list[WorkflowStep | None] = [None] * count
    for k in range(count):
        parents = draw(st.lists(st.integers(0, k - 1), unique=True, max_size=3)) if k else []
        after = [order[p] for p in parents]
        feeds = [Feed.NONE] + [Feed.ALL] * bool(after) + [Feed.ONE] * (len(after) == 1)
        steps[order[k]] = step(f"t{order[k]}", after=after, feed=draw(st.sampled_from(feeds)))
    return SubmitWorkflow(
        steps=[s for s in steps if s is not None],
        workflow_id="w",
        on_failure=draw(st.sampled_from(OnFailure)),
        link=[TaskSpec(name="link")] * draw(st.integers(0, 2)),
        link_error=[TaskSpec(name="link_error")] * draw(st.integers(0, 2)),
    )


class Checked(Crashable):
    """Checks every release of the book against what the board holds."""

    def __init__(self, definition: SubmitWorkflow) -> None:
        super().__init__()
        self.definition = definition
        self.restoring = False
        self.shadow = WorkflowBook()  # told the same, never crashed

    def end(self, task_id: str, status: TaskState, value: object = None) -> TaskResult:
        final = super().end(task_id, status, value)
        self.shadow.finished(final, self.now)
        return final

    def cancel(self) -> None:
        self.shadow.cancel("w", self.now)
        self.act(self.book.cancel("w", self.now))

    def act(self, actions: Actions) -> None:
        for spec, _ in actions.release:
            held = spec.id in self.queued or spec.id in self.results
            assert self.restoring or not held, f"{spec.id} released again"
            if (found := parse_step(spec.id)) is not None:
                self.check_release(found[1], spec)
        super().act(actions)

    def check_release(self, index: int, spec: TaskSpec) -> None:
        definition = self.definition.steps[index]
        for parent in definition.after:
            assert self.final.get(f"w.{parent}") == TaskState.SUCCESS, (index, parent)
        fed = [f"r{p}" for p in definition.after]
        if definition.feed == Feed.ONE:
            assert spec.args == fed
        elif definition.feed == Feed.ALL:
            assert spec.args == [fed]
        else:
            assert spec.args == []

    def crash(self, compact: bool) -> None:
        before = image(self.book)
        if compact:
            self.compact()
        restored = WorkflowBook()
        outstanding = restored.restore(through_msgpack(self.journal), self.now)
        assert image(restored) == before
        self.book, self.restoring = restored, True
        self.act(outstanding)
        self.restoring = False


def finish(run: Checked, task_id: str, operation: int) -> None:
    found = parse_step(task_id)
    value = f"r{found[1]}" if found else None
    status = {FAIL: TaskState.FAILURE, CANCEL_STEP: TaskState.CANCELLED}.get(
        operation, TaskState.SUCCESS
    )
    run.end(task_id, status, value)


@settings(max_examples=300, deadline=None)
@given(workflows(), st.lists(st.tuples(OPERATIONS, st.integers(0, 99)), max_size=30))
def test_random_workflows_release_each_step_once_after_its_parents(
    submit: SubmitWorkflow, operations: list[tuple[int, int]]
) -> None:
    run = Checked(submit)
    run.shadow.accept(submit, run.now)
    run.submit(submit.steps, **{k: getattr(submit, k) for k in _OPTIONS})
    for operation, pick in operations:
        if operation in (CRASH, COMPACT):
            run.crash(compact=operation == COMPACT)
        elif operation == CANCEL:
            run.cancel()
        elif run.queued:
            finish(run, sorted(run.queued)[pick % len(run.queued)], operation)
        assert image(run.book) == image(run.shadow)
    while run.queued:  # the rest succeeds
        finish(run, sorted(run.queued)[0], SUCCEED)

    info = run.book.info("w")
    assert info is not None
    states: list[str] = [s.state for s in info.steps]  # StepState and TaskState compare equal
    assert all(count == 1 for count in run.released.values())
    assert all(s != StepState.WAITING for s in states)
    for index, state in enumerate(states):
        assert (state == StepState.SKIPPED) == (f"w.{index}" not in run.final)
    links = sorted(task_id for task_id in run.final if parse_step(task_id) is None)
    if info.state == WorkflowState.SUCCESS:
        assert all(s == TaskState.SUCCESS for s in states)
        assert links == [f"w.link-{k}" for k in range(len(submit.link))]
    elif info.state == WorkflowState.FAILURE:
        assert any(s in (TaskState.FAILURE, TaskState.CANCELLED) for s in states)
        assert links == [f"w.link_error-{k}" for k in range(len(submit.link_error))]
    else:
        assert info.state == WorkflowState.CANCELLED
        assert links == []
    assert run.book.live_bytes == 0
    assert all(not p.results for p in run.book.snapshot()[1::2])  # type: ignore[union-attr]
    assert run.book.info("w") == info  # and it stays so
    assert run.now == NOW


_OPTIONS = ("workflow_id", "on_failure", "link", "link_error")
