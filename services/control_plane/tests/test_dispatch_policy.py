"""Least-loaded dispatch: fewest in flight, then fewest assigned so far, then lowest id."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fastworker_control_plane.core.dispatch_policy import Load, least_loaded


def load(worker_id: str, in_flight: int, capacity: int = 4, assigned_total: int = 0) -> Load:
    return Load(worker_id, in_flight, capacity, assigned_total)


def test_the_worker_with_the_fewest_tasks_in_flight_is_chosen() -> None:
    candidates = [load("a", 3), load("b", 1), load("c", 2)]

    assert least_loaded(candidates) == "b"


def test_a_tie_in_flight_goes_to_the_worker_given_the_fewest_tasks_so_far() -> None:
    candidates = [load("a", 1, assigned_total=10), load("b", 1, assigned_total=4)]

    assert least_loaded(candidates) == "b"


def test_a_full_tie_goes_to_the_lowest_worker_id() -> None:
    candidates = [load("w2", 0, assigned_total=5), load("w1", 0, assigned_total=5)]

    assert least_loaded(candidates) == "w1"


def test_in_flight_outweighs_assigned_total() -> None:
    candidates = [load("busy", 2, assigned_total=0), load("veteran", 0, assigned_total=1000)]

    assert least_loaded(candidates) == "veteran"


def test_a_full_worker_is_skipped_even_if_it_is_otherwise_the_best() -> None:
    candidates = [load("tiny", 1, capacity=1), load("big", 3, capacity=8)]

    assert least_loaded(candidates) == "big"


def test_no_worker_is_chosen_when_all_are_full() -> None:
    candidates = [load("a", 2, capacity=2), load("b", 5, capacity=5)]

    assert least_loaded(candidates) is None


def test_no_worker_is_chosen_from_no_candidates() -> None:
    assert least_loaded([]) is None


def test_candidates_may_be_any_iterable() -> None:
    assert least_loaded(load(w, i) for w, i in [("a", 1), ("b", 0)]) == "b"


def test_has_room_means_fewer_in_flight_than_capacity() -> None:
    assert load("a", 0, capacity=1).has_room
    assert not load("a", 1, capacity=1).has_room


loads = st.lists(
    st.builds(
        Load,
        worker_id=st.text("abcdef", min_size=1, max_size=3),
        in_flight=st.integers(0, 10),
        capacity=st.integers(0, 10),
        assigned_total=st.integers(0, 100),
    ),
    max_size=12,
)


@given(loads)
def test_the_chosen_worker_has_minimal_in_flight_among_workers_with_room(
    candidates: list[Load],
) -> None:
    with_room = [c for c in candidates if c.has_room]

    chosen = least_loaded(candidates)

    if not with_room:
        assert chosen is None
        return
    assert chosen is not None
    picked = [c for c in with_room if c.worker_id == chosen]
    assert picked, "the chosen worker must be one with room"
    assert min(c.in_flight for c in picked) == min(c.in_flight for c in with_room)
