"""Helpers for the workflow book's tests: step builders and ``Run``, which stands in for
the board: it queues what the book releases (refusing to queue an id twice), cancels what
it asks, and reports results back as the board would.

Not a test module, so that no other ``test_workflows`` on the path shadows it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastworker_control_plane.core.workflows import Actions, WorkflowBook
from fastworker_protocol import Priority, TaskResult, TaskSpec, TaskState
from fastworker_protocol.workflows import (
    Feed,
    StepState,
    SubmitWorkflow,
    WorkflowState,
    WorkflowStep,
)

NOW = 1000.0


def step(
    name: str = "add",
    *args: Any,
    after: list[int] | None = None,
    feed: Feed = Feed.NONE,
    priority: Priority = Priority.NORMAL,
) -> WorkflowStep:
    return WorkflowStep(
        task=TaskSpec(name=name, args=list(args)), after=after or [], feed=feed, priority=priority
    )


def chain(count: int) -> list[WorkflowStep]:
    return [step("add", 1, 2)] + [
        step("add", 10, after=[i], feed=Feed.ONE) for i in range(count - 1)
    ]


def chord(count: int) -> list[WorkflowStep]:
    parents = [step("square", i) for i in range(count)]
    return [*parents, step("tsum", after=list(range(count)), feed=Feed.ALL)]


def result(task_id: str, status: TaskState, value: Any = None) -> TaskResult:
    return TaskResult(task_id=task_id, name="t", status=status, result=value)


class Run:
    """A board of one: what the book released, waiting to be finished by the test."""

    def __init__(self, book: WorkflowBook | None = None) -> None:
        ids = (f"wf{i}" for i in range(10**6))
        self.book = book if book is not None else WorkflowBook(new_id=ids.__next__)
        self.queued: dict[str, TaskSpec] = {}  # released, not final
        self.priorities: dict[str, Priority] = {}
        self.released: Counter[str] = Counter()
        self.final: dict[str, TaskState] = {}
        self.results: dict[str, TaskResult] = {}  # the board's final results
        self.ended: list[str] = []
        self.now = NOW

    def submit(self, steps: list[WorkflowStep], **options: Any) -> str:
        accepted = self.book.accept(SubmitWorkflow(steps=steps, **options), self.now)
        self.act(Actions(release=accepted.release, records=accepted.records))
        return accepted.workflow_id

    def act(self, actions: Actions) -> None:
        self.ended += actions.ended
        for spec, priority in actions.release:
            assert spec.id not in self.queued, spec.id
            assert spec.id not in self.final, spec.id
            self.released[spec.id] += 1
            self.queued[spec.id] = spec
            self.priorities[spec.id] = priority
        for task_id in actions.cancel:
            if task_id in self.queued:
                self.end(task_id, TaskState.CANCELLED)

    def end(self, task_id: str, status: TaskState, value: Any = None) -> TaskResult:
        del self.queued[task_id]
        self.final[task_id] = status
        final = self.results[task_id] = result(task_id, status, value)
        self.act(self.book.finished(final, self.now))
        return final

    def succeed(self, task_id: str, value: Any = None) -> None:
        self.end(task_id, TaskState.SUCCESS, value)

    def fail(self, task_id: str) -> None:
        self.end(task_id, TaskState.FAILURE)

    def run_all(self) -> None:
        """Finish everything queued, until nothing is: each task returns its first
        argument (tasks fed results pass them on)."""
        while self.queued:
            task_id, spec = next(iter(self.queued.items()))
            self.succeed(task_id, spec.args[0] if spec.args else None)

    def state(self, workflow_id: str) -> WorkflowState:
        info = self.book.info(workflow_id)
        assert info is not None
        return info.state

    def steps(self, workflow_id: str) -> list[TaskState | StepState]:
        info = self.book.info(workflow_id)
        assert info is not None
        return [s.state for s in info.steps]
