"""The task and worker state machines, walked pair by pair against tables written out here."""

from __future__ import annotations

from enum import StrEnum
from itertools import product

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastworker_protocol import (
    FINAL_TASK_STATES,
    TASK_TRANSITIONS,
    TERMINAL_TASK_STATES,
    WORKER_TRANSITIONS,
    InvalidTransition,
    TaskEvent,
    TaskState,
    WorkerEvent,
    WorkerState,
    next_task_state,
    next_worker_state,
)

S, E = TaskState, TaskEvent
EXPECTED_TASK_TRANSITIONS = {
    (S.PENDING, E.ENQUEUE): S.QUEUED,
    (S.PENDING, E.SCHEDULE): S.SCHEDULED,
    (S.PENDING, E.CANCEL): S.CANCELLED,
    (S.QUEUED, E.ASSIGN): S.ASSIGNED,
    (S.QUEUED, E.CANCEL): S.CANCELLED,
    (S.SCHEDULED, E.DUE): S.QUEUED,
    (S.SCHEDULED, E.CANCEL): S.CANCELLED,
    (S.ASSIGNED, E.START): S.RUNNING,
    (S.ASSIGNED, E.SUCCEED): S.SUCCESS,
    (S.ASSIGNED, E.FAIL): S.FAILURE,
    (S.ASSIGNED, E.REQUEUE): S.QUEUED,
    (S.ASSIGNED, E.CANCEL): S.CANCELLED,
    (S.RUNNING, E.SUCCEED): S.SUCCESS,
    (S.RUNNING, E.FAIL): S.FAILURE,
    (S.RUNNING, E.REQUEUE): S.QUEUED,
    (S.RUNNING, E.CANCEL): S.CANCELLED,
    (S.FAILURE, E.RETRY): S.RETRYING,
    (S.RETRYING, E.DUE): S.QUEUED,
    (S.RETRYING, E.CANCEL): S.CANCELLED,
}

W, WE = WorkerState, WorkerEvent
EXPECTED_WORKER_TRANSITIONS = {
    (W.INIT, WE.START): W.STARTING,
    (W.INIT, WE.STOP): W.STOPPED,
    (W.STARTING, WE.READY): W.RUNNING,
    (W.STARTING, WE.STOP): W.STOPPING,
    (W.RUNNING, WE.DRAIN): W.DRAINING,
    (W.RUNNING, WE.STOP): W.STOPPING,
    (W.DRAINING, WE.STOP): W.STOPPING,
    (W.STOPPING, WE.STOPPED): W.STOPPED,
}

ALLOWED_TASK_PAIRS = sorted(EXPECTED_TASK_TRANSITIONS)
FORBIDDEN_TASK_PAIRS = [
    p for p in product(TaskState, TaskEvent) if p not in EXPECTED_TASK_TRANSITIONS
]
ALLOWED_WORKER_PAIRS = sorted(EXPECTED_WORKER_TRANSITIONS)
FORBIDDEN_WORKER_PAIRS = [
    p for p in product(WorkerState, WorkerEvent) if p not in EXPECTED_WORKER_TRANSITIONS
]


def _pair_id(pair: tuple[str, str]) -> str:
    return f"{pair[0]}-{pair[1]}"


@pytest.mark.parametrize("pair", ALLOWED_TASK_PAIRS, ids=_pair_id)
def test_an_allowed_task_event_moves_to_the_tables_target(
    pair: tuple[TaskState, TaskEvent],
) -> None:
    assert next_task_state(*pair) == EXPECTED_TASK_TRANSITIONS[pair]


@pytest.mark.parametrize("pair", FORBIDDEN_TASK_PAIRS, ids=_pair_id)
def test_any_other_task_event_raises_invalid_transition(pair: tuple[TaskState, TaskEvent]) -> None:
    state, event = pair
    with pytest.raises(InvalidTransition) as caught:
        next_task_state(state, event)
    assert (caught.value.state, caught.value.event) == (state, event)


def test_an_invalid_transition_names_the_event_and_state_as_on_the_wire() -> None:
    with pytest.raises(InvalidTransition) as caught:
        next_task_state(S.SUCCESS, E.RETRY)
    assert str(caught.value) == "event 'retry' is not allowed in state 'success'"


def test_the_task_table_is_exactly_the_documented_one() -> None:
    assert {(s, e): t for s, row in TASK_TRANSITIONS.items() for e, t in row.items()} == (
        EXPECTED_TASK_TRANSITIONS
    )
    assert set(TASK_TRANSITIONS) == set(TaskState)


@pytest.mark.parametrize("state", [S.SUCCESS, S.CANCELLED])
@pytest.mark.parametrize("event", list(TaskEvent))
def test_a_terminal_task_state_accepts_no_event(state: TaskState, event: TaskEvent) -> None:
    with pytest.raises(InvalidTransition):
        next_task_state(state, event)


def test_failure_accepts_only_retry() -> None:
    accepted = set()
    for event in TaskEvent:
        try:
            next_task_state(S.FAILURE, event)
        except InvalidTransition:
            continue
        accepted.add(event)
    assert accepted == {E.RETRY}


def test_success_and_cancelled_are_terminal_and_failure_is_final_too() -> None:
    assert (
        {s for s in TaskState if s.is_terminal} == TERMINAL_TASK_STATES == {S.SUCCESS, S.CANCELLED}
    )
    assert {s for s in TaskState if s.is_final} == FINAL_TASK_STATES
    assert {S.SUCCESS, S.CANCELLED, S.FAILURE} == FINAL_TASK_STATES


def test_every_terminal_state_is_final() -> None:
    assert TERMINAL_TASK_STATES < FINAL_TASK_STATES


@given(st.lists(st.sampled_from(TaskEvent), max_size=30))
def test_no_sequence_of_events_leads_out_of_a_terminal_state(events: list[TaskEvent]) -> None:
    state = S.PENDING
    for event in events:
        try:
            following = next_task_state(state, event)
        except InvalidTransition:
            continue
        assert not state.is_terminal
        state = following


@pytest.mark.parametrize("pair", ALLOWED_WORKER_PAIRS, ids=_pair_id)
def test_an_allowed_worker_event_moves_to_the_tables_target(
    pair: tuple[WorkerState, WorkerEvent],
) -> None:
    assert next_worker_state(*pair) == EXPECTED_WORKER_TRANSITIONS[pair]


@pytest.mark.parametrize("pair", FORBIDDEN_WORKER_PAIRS, ids=_pair_id)
def test_any_other_worker_event_raises_invalid_transition(
    pair: tuple[WorkerState, WorkerEvent],
) -> None:
    with pytest.raises(InvalidTransition, match="is not allowed in state"):
        next_worker_state(*pair)


def test_the_worker_table_is_exactly_the_documented_one() -> None:
    assert {(s, e): t for s, row in WORKER_TRANSITIONS.items() for e, t in row.items()} == (
        EXPECTED_WORKER_TRANSITIONS
    )
    assert set(WORKER_TRANSITIONS) == set(WorkerState)


def test_a_stopped_worker_accepts_no_event() -> None:
    assert WORKER_TRANSITIONS[W.STOPPED] == {}


def test_a_worker_can_run_its_whole_life_in_order() -> None:
    state = W.INIT
    for event in (WE.START, WE.READY, WE.DRAIN, WE.STOP, WE.STOPPED):
        state = next_worker_state(state, event)
    assert state == W.STOPPED


def test_the_transition_tables_cannot_be_changed_at_run_time() -> None:
    with pytest.raises(TypeError):
        TASK_TRANSITIONS[S.SUCCESS] = {E.RETRY: S.QUEUED}  # type: ignore[index]
    with pytest.raises(TypeError):
        WORKER_TRANSITIONS[W.STOPPED] = {WE.START: W.STARTING}  # type: ignore[index]


@pytest.mark.parametrize("enum", [TaskState, TaskEvent, WorkerState, WorkerEvent])
def test_states_and_events_equal_their_lowercase_names_on_the_wire(enum: type[StrEnum]) -> None:
    assert all(member == member.name.lower() for member in enum)
