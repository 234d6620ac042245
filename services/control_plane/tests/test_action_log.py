"""The operators' action log: sequence numbers, resuming, and its bound."""

from __future__ import annotations

from fastworker_control_plane.action_log import ActionLog


def test_actions_are_numbered_and_read_back_after_a_sequence_number() -> None:
    log = ActionLog()
    first = log.record("task.cancel", "t1", "http", 1000.0)
    second = log.record("failed.retry", "", "client", 1001.0, retried=3)

    assert (first.seq, second.seq) == (1, 2)
    assert log.since(0) == [first, second]
    assert log.since(1) == [second]
    assert log.since(2) == []
    assert second.detail == {"retried": 3}


def test_only_the_newest_actions_are_kept() -> None:
    log = ActionLog(max_actions=3)
    for n in range(5):
        log.record("queue.pause", f"q{n}", "http", 1000.0 + n)

    assert [a.target for a in log.since(0)] == ["q2", "q3", "q4"]
    assert log.last_seq == 5
