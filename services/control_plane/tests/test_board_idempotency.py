"""Idempotency keys: a key stands for the first task submitted with it (per task name) while
that task is live or its result is kept; then it is free again."""

from __future__ import annotations

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_protocol import Outcome, Param, Priority, TaskSignature, TaskSpec

NOW = 1000.0
TTL = 60.0


def sig(name: str) -> TaskSignature:
    return TaskSignature(name=name, params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


def board() -> TaskBoard:
    b = TaskBoard(BoardConfig(result_ttl=TTL))
    b.register("w1", "host", 10, [sig("charge"), sig("refund")], NOW)
    return b


def keyed(task_id: str, key: str | None, name: str = "charge") -> TaskSpec:
    return TaskSpec(name=name, id=task_id, args=[1], idempotency_key=key)


def test_a_second_submission_with_the_same_key_returns_the_first_task() -> None:
    b = board()
    [first] = b.submit([keyed("t1", "order-7")], Priority.NORMAL, NOW)[0]

    [again] = b.submit([keyed("t2", "order-7")], Priority.NORMAL, NOW)[0]
    ids, rejected = b.submit_each([keyed("t3", "order-7")], Priority.NORMAL, NOW)[:2]

    assert first == again == "t1"
    assert (ids, rejected) == (["t1"], [])
    assert b.get("t2", NOW) is None
    assert len(b) == 1


def test_the_key_holds_while_the_result_is_kept_and_is_free_once_it_expires() -> None:
    b = board()
    b.submit([keyed("t1", "order-7")], Priority.NORMAL, NOW)
    b.dispatch(["w1"])
    b.report("w1", [], [Outcome(task_id="t1", ok=True, result=1)], NOW)

    assert b.submit([keyed("t2", "order-7")], Priority.NORMAL, NOW + TTL / 2)[0] == ["t1"]
    assert b.submit([keyed("t3", "order-7")], Priority.NORMAL, NOW + TTL + 1)[0] == ["t3"]


def test_keys_are_per_task_name() -> None:
    b = board()

    assert b.submit([keyed("c", "k", "charge")], Priority.NORMAL, NOW)[0] == ["c"]
    assert b.submit([keyed("r", "k", "refund")], Priority.NORMAL, NOW)[0] == ["r"]


def test_tasks_without_a_key_are_never_merged() -> None:
    b = board()

    assert b.submit([keyed("a", None), keyed("b", None)], Priority.NORMAL, NOW)[0] == ["a", "b"]


def test_stale_keys_are_forgotten_once_their_task_is_gone() -> None:
    b = board()
    b.submit([keyed("t1", "order-7"), keyed("t2", "order-8")], Priority.NORMAL, NOW)
    b.cancel("t1", NOW)

    assert b.store.forget_stale_keys(NOW + TTL + 1) == 1  # t1's result expired; t2 still queued
    assert len(b.store.keys) == 1


def test_keys_of_evicted_results_are_forgotten_as_new_keys_come_without_a_scan() -> None:
    b = TaskBoard(BoardConfig(result_ttl=TTL, result_max_size=50))
    b.register("w1", "host", 10, [sig("charge")], NOW)

    for i in range(5_000):  # steady load: each task finishes, the cache evicts the oldest
        b.submit([keyed(f"t{i}", f"order-{i}")], Priority.NORMAL, NOW)
        b.cancel(f"t{i}", NOW)

    assert len(b.store.keys) <= 2 * 50 + 1  # about as many as the results they stand for
    [again] = b.submit([keyed("new", "order-4999")], Priority.NORMAL, NOW)[0]
    assert again == "t4999"  # a key whose result is kept still holds
    [fresh] = b.submit([keyed("t-new", "order-0")], Priority.NORMAL, NOW)[0]
    assert fresh == "t-new"  # one whose result was evicted is free again


def test_a_key_whose_task_is_still_live_is_never_pruned() -> None:
    b = board()
    b.submit([keyed("long", "order-1")], Priority.NORMAL, NOW)  # stays queued

    for i in range(1_000):
        b.submit([keyed(f"t{i}", f"other-{i}")], Priority.NORMAL, NOW)
        b.cancel(f"t{i}", NOW)

    [again] = b.submit([keyed("dup", "order-1")], Priority.NORMAL, NOW)[0]
    assert again == "long"
