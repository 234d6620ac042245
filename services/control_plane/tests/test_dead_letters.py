"""The dead-letter store on its own: bounded by count, age and bytes (oldest first, the
newest always kept), filtered by ids, task name, error type and time, newest first."""

from __future__ import annotations

from typing import Any

import pytest

from fastworker_control_plane.core.dead_letters import DeadLetters, Kept, kept
from fastworker_protocol import DeadLetter, FailedFilter, TaskError

NOW = 1000.0
HOUR = 3600.0


def letter(task_id: str, failed_at: float = NOW, **fields: Any) -> Kept:
    fields.setdefault("error", TaskError(type="ValueError", message="bad"))
    fields.setdefault("name", "add")
    return kept(DeadLetter(task_id=task_id, failed_at=failed_at, **fields), {})


def ids(found: Any) -> list[str]:
    return [k.task_id for k in found]


def test_past_its_count_the_oldest_letters_go_first() -> None:
    store = DeadLetters(max_count=3)

    for n in range(5):
        store.add(letter(f"t{n}", NOW + n), NOW + n)

    assert ids(store.letters()) == ["t2", "t3", "t4"]
    assert store.evicted == 2


def test_a_letter_expires_its_ttl_after_it_failed() -> None:
    store = DeadLetters(ttl=HOUR)
    store.add(letter("old", NOW), NOW)
    store.add(letter("new", NOW + HOUR / 2), NOW + HOUR / 2)

    assert ids(store.newest_first(FailedFilter(), NOW + HOUR - 1)) == ["new", "old"]
    assert ids(store.newest_first(FailedFilter(), NOW + HOUR)) == ["new"]
    assert (len(store), store.expired) == (1, 1)
    assert store.missing(FailedFilter(task_ids=["old", "new"]), NOW + HOUR) == ["old"]


def test_past_its_bytes_the_oldest_go_first_but_the_newest_always_stays() -> None:
    big = 10_000
    store = DeadLetters(max_bytes=3 * big)

    for n in range(4):
        store.add(letter(f"t{n}", NOW + n, args=["x" * big]), NOW + n)
    # (each letter is its argument plus a little: three are just over the bound)
    assert ids(store.letters()) == ["t2", "t3"]
    assert store.bytes <= store.max_bytes

    store.add(letter("huge", NOW + 9, args=["x" * (5 * big)]), NOW + 9)
    assert ids(store.letters()) == ["huge"]
    assert store.bytes > store.max_bytes


def test_bounds_must_be_positive() -> None:
    for bounds in ({"max_count": 0}, {"ttl": 0.0}, {"max_bytes": -1}):
        with pytest.raises(ValueError, match="positive"):
            DeadLetters(**bounds)


def test_filters_narrow_by_name_error_type_and_failure_time_newest_first() -> None:
    store = DeadLetters()
    lost = TaskError(type="WorkerLost", message="gone", reason="worker_lost")
    store.add(letter("a", NOW), NOW)
    store.add(letter("b", NOW + 10, name="mail"), NOW + 10)
    store.add(letter("c", NOW + 20, error=lost), NOW + 20)
    store.add(letter("d", NOW + 30), NOW + 30)

    def found(**fields: Any) -> list[str]:
        return ids(store.newest_first(FailedFilter(**fields), NOW + 30))

    assert found() == ["d", "c", "b", "a"]
    assert found(task_name="add") == ["d", "c", "a"]
    assert found(error_type="WorkerLost") == ["c"]
    assert found(error_type="ValueError", task_name="add") == ["d", "a"]
    assert found(since=NOW + 10) == ["d", "c", "b"]
    assert found(until=NOW + 20) == ["b", "a"]
    assert found(since=NOW + 10, until=NOW + 30) == ["c", "b"]
    assert found(task_ids=["a", "d", "zz", "a"]) == ["d", "a"]
    assert found(task_ids=["a", "c"], error_type="ValueError") == ["a"]
    assert ids(store.oldest_first(FailedFilter(task_name="add"), NOW + 30)) == ["a", "c", "d"]


def test_a_removal_returns_the_ids_it_took_out_for_the_journal() -> None:
    store = DeadLetters()
    for name in ("a", "b", "c"):
        store.add(letter(name), NOW)

    assert store.remove(["a"]) == ["a"]
    assert store.remove(["b", "zz"]) == ["b"]  # an id not stored is not noted

    assert store.remove(["b"]) == []
    assert ids(store.letters()) == ["c"]
    assert store.bytes == store.letters()[0].size


def test_a_letter_added_again_replaces_the_old_one() -> None:
    store = DeadLetters()
    store.add(letter("a", NOW, args=[1]), NOW)
    store.add(letter("a", NOW + 1, args=[2]), NOW + 1)

    assert [k.letter.args for k in store.letters()] == [[2]]
    assert store.bytes == store.letters()[0].size
