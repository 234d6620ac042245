"""Strict priority queues of task ids, with lazy removal."""

from __future__ import annotations

from collections.abc import Callable

from fastworker_control_plane.core.queues import PriorityQueues
from fastworker_protocol import Priority


def always(_: str) -> bool:
    return True


def drain(queues: PriorityQueues, is_queued: Callable[[str], bool] = always) -> list[str]:
    out = []
    while (task_id := queues.pop(is_queued)) is not None:
        out.append(task_id)
    return out


def test_an_empty_queue_pops_nothing() -> None:
    queues = PriorityQueues()

    assert queues.pop(always) is None
    assert len(queues) == 0


def test_a_critical_task_is_dispatched_before_an_older_low_task() -> None:
    queues = PriorityQueues()
    queues.push("old-low", "t", Priority.LOW)
    queues.push("new-critical", "t", Priority.CRITICAL)

    assert queues.pop(always) == "new-critical"


def test_priorities_drain_critical_then_high_then_normal_then_low() -> None:
    queues = PriorityQueues()
    for priority in (Priority.LOW, Priority.NORMAL, Priority.HIGH, Priority.CRITICAL):
        queues.push(priority.value, "t", priority)

    assert drain(queues) == ["critical", "high", "normal", "low"]


def test_tasks_of_one_priority_come_out_first_in_first_out() -> None:
    queues = PriorityQueues()
    for i in range(5):
        queues.push(f"t{i}", "t", Priority.NORMAL)

    assert drain(queues) == ["t0", "t1", "t2", "t3", "t4"]


def test_mixed_priorities_are_strict_between_levels_and_fifo_within_them() -> None:
    queues = PriorityQueues()
    pushes = [
        ("n1", Priority.NORMAL),
        ("l1", Priority.LOW),
        ("h1", Priority.HIGH),
        ("n2", Priority.NORMAL),
        ("c1", Priority.CRITICAL),
        ("h2", Priority.HIGH),
        ("l2", Priority.LOW),
    ]
    for task_id, priority in pushes:
        queues.push(task_id, "t", priority)

    assert drain(queues) == ["c1", "h1", "h2", "n1", "n2", "l1", "l2"]


def test_a_task_pushed_to_the_front_goes_before_older_tasks_of_its_priority_only() -> None:
    queues = PriorityQueues()
    queues.push("h1", "t", Priority.HIGH)
    queues.push("n1", "t", Priority.NORMAL)
    queues.push("n2", "t", Priority.NORMAL)

    queues.push("redelivered", "t", Priority.NORMAL, front=True)

    assert drain(queues) == ["h1", "redelivered", "n1", "n2"]


def test_a_discarded_task_is_skipped_when_popped() -> None:
    queues = PriorityQueues()
    for task_id in ("a", "b", "c"):
        queues.push(task_id, "t", Priority.NORMAL)
    cancelled = {"b"}

    queues.discard(Priority.NORMAL, "t")

    assert len(queues) == 2
    assert drain(queues, lambda t: t not in cancelled) == ["a", "c"]
    assert len(queues) == 0
    assert queues.depth(Priority.NORMAL) == 0


def test_popping_only_skipped_ids_yields_nothing() -> None:
    queues = PriorityQueues()
    queues.push("gone", "t", Priority.HIGH)
    queues.discard(Priority.HIGH, "t")

    assert queues.pop(lambda _: False) is None
    assert len(queues) == 0


def test_a_skipped_id_at_a_higher_priority_does_not_hide_lower_priorities() -> None:
    queues = PriorityQueues()
    queues.push("gone", "t", Priority.CRITICAL)
    queues.push("live", "t", Priority.LOW)
    queues.discard(Priority.CRITICAL, "t")

    assert queues.pop(lambda t: t != "gone") == "live"


def test_depth_is_counted_per_priority_and_len_is_their_sum() -> None:
    queues = PriorityQueues()
    queues.push("c", "t", Priority.CRITICAL)
    queues.push("n1", "t", Priority.NORMAL)
    queues.push("n2", "t", Priority.NORMAL)
    queues.push("n3", "t", Priority.NORMAL, front=True)

    depths = {p: queues.depth(p) for p in Priority}
    assert depths == {Priority.CRITICAL: 1, Priority.HIGH: 0, Priority.NORMAL: 3, Priority.LOW: 0}
    assert len(queues) == 4

    queues.pop(always)
    queues.pop(always)

    assert queues.depth(Priority.CRITICAL) == 0
    assert queues.depth(Priority.NORMAL) == 2
    assert len(queues) == 2
