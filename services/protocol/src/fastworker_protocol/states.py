"""The task and worker state machines, as data.

Rules, written once here and enforced by :func:`next_task_state` / :func:`next_worker_state`:

* A task is born PENDING. Submission queues it (QUEUED) or, when it has an ETA, parks it
  on the scheduler heap (SCHEDULED) until it is due.
* Dispatch hands a QUEUED task to one subworker (ASSIGNED); the subworker reports it
  started (RUNNING) and then finished (SUCCESS or FAILURE).
* If the subworker holding an ASSIGNED or RUNNING task is lost, the task is REQUEUED.
* A FAILURE with retries left goes RETRYING, and back to QUEUED when its backoff is due.
* Anything not yet finished can be CANCELLED.
* SUCCESS and CANCELLED are terminal: no event moves them. FAILURE is final unless the
  control plane retries it, which it decides in the same step that records the failure.

The tables are the single source of truth: the docs' diagrams are generated from them and
the unit tests walk every state x event pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class TaskState(StrEnum):
    """A task's state. Members equal their lowercase names (``TaskState.SUCCESS == "success"``)."""

    PENDING = "pending"
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    ASSIGNED = "assigned"
    RUNNING = "running"
    SUCCESS = "success"
    FAILURE = "failure"
    RETRYING = "retrying"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """No event can leave this state."""
        return self in TERMINAL_TASK_STATES

    @property
    def is_final(self) -> bool:
        """The task has an outcome callers may wait for (terminal, or FAILURE not retried)."""
        return self in FINAL_TASK_STATES


class TaskEvent(StrEnum):
    ENQUEUE = "enqueue"
    SCHEDULE = "schedule"
    DUE = "due"
    ASSIGN = "assign"
    START = "start"
    SUCCEED = "succeed"
    FAIL = "fail"
    REQUEUE = "requeue"
    RETRY = "retry"
    CANCEL = "cancel"


TERMINAL_TASK_STATES = frozenset({TaskState.SUCCESS, TaskState.CANCELLED})
FINAL_TASK_STATES = TERMINAL_TASK_STATES | {TaskState.FAILURE}

_S, _E = TaskState, TaskEvent
TASK_TRANSITIONS: Mapping[TaskState, Mapping[TaskEvent, TaskState]] = MappingProxyType(
    {
        _S.PENDING: {_E.ENQUEUE: _S.QUEUED, _E.SCHEDULE: _S.SCHEDULED, _E.CANCEL: _S.CANCELLED},
        _S.QUEUED: {_E.ASSIGN: _S.ASSIGNED, _E.CANCEL: _S.CANCELLED},
        _S.SCHEDULED: {_E.DUE: _S.QUEUED, _E.CANCEL: _S.CANCELLED},
        _S.ASSIGNED: {
            _E.START: _S.RUNNING,
            _E.SUCCEED: _S.SUCCESS,
            _E.FAIL: _S.FAILURE,
            _E.REQUEUE: _S.QUEUED,
            _E.CANCEL: _S.CANCELLED,
        },
        _S.RUNNING: {
            _E.SUCCEED: _S.SUCCESS,
            _E.FAIL: _S.FAILURE,
            _E.REQUEUE: _S.QUEUED,
            _E.CANCEL: _S.CANCELLED,
        },
        _S.FAILURE: {_E.RETRY: _S.RETRYING},
        _S.RETRYING: {_E.DUE: _S.QUEUED, _E.CANCEL: _S.CANCELLED},
        _S.SUCCESS: {},
        _S.CANCELLED: {},
    }
)


class WorkerState(StrEnum):
    INIT = "init"
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPING = "stopping"
    STOPPED = "stopped"


class WorkerEvent(StrEnum):
    START = "start"
    READY = "ready"
    DRAIN = "drain"
    STOP = "stop"
    STOPPED = "stopped"


_W, _WE = WorkerState, WorkerEvent
WORKER_TRANSITIONS: Mapping[WorkerState, Mapping[WorkerEvent, WorkerState]] = MappingProxyType(
    {
        _W.INIT: {_WE.START: _W.STARTING, _WE.STOP: _W.STOPPED},
        _W.STARTING: {_WE.READY: _W.RUNNING, _WE.STOP: _W.STOPPING},
        _W.RUNNING: {_WE.DRAIN: _W.DRAINING, _WE.STOP: _W.STOPPING},
        _W.DRAINING: {_WE.STOP: _W.STOPPING},
        _W.STOPPING: {_WE.STOPPED: _W.STOPPED},
        _W.STOPPED: {},
    }
)


class InvalidTransition(ValueError):
    """An event that the current state does not accept."""

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"event '{event}' is not allowed in state '{state}'")
        self.state = state
        self.event = event


def next_task_state(state: TaskState, event: TaskEvent) -> TaskState:
    try:
        return TASK_TRANSITIONS[state][event]
    except KeyError:
        raise InvalidTransition(state, event) from None


def next_worker_state(state: WorkerState, event: WorkerEvent) -> WorkerState:
    try:
        return WORKER_TRANSITIONS[state][event]
    except KeyError:
        raise InvalidTransition(state, event) from None
