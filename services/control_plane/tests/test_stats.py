"""The task board's numbers: tallies by task name and priority, run-time and queue-wait
histograms, finished tasks per second; on their own and as the board records them, with
explicit ``now`` values."""

from __future__ import annotations

import pytest

from fastworker_common.histogram import Histogram
from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.entropy import counting
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.core.stats import THROUGHPUT_SPAN, Tally, TaskStats, Throughput
from fastworker_protocol import (
    Outcome,
    Param,
    Priority,
    TaskError,
    TaskSignature,
    TaskSpec,
)

NOW = 1000.0
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])
FLAKY = TaskSignature(name="flaky", max_retries=2, retry_backoff=1.0)


# --- Throughput ---------------------------------------------------------------------------


def test_finishes_in_the_same_whole_second_add_up_in_one_point() -> None:
    throughput = Throughput()

    throughput.add(1000.1, ok=True)
    throughput.add(1000.9, ok=True)
    throughput.add(1000.5, ok=False)

    assert throughput.points(1000.99, 1) == [(1000, 2, 1)]


def test_points_cover_the_window_oldest_first_ending_at_now() -> None:
    throughput = Throughput()
    throughput.add(998.0, ok=True)
    throughput.add(1000.0, ok=False)

    assert throughput.points(1000.4, 3) == [(998, 1, 0), (999, 0, 0), (1000, 0, 1)]


def test_seconds_with_no_finish_give_zero() -> None:
    throughput = Throughput()
    throughput.add(995.0, ok=True)
    throughput.add(1000.0, ok=True)

    points = throughput.points(1002.0, 10)

    assert [t for t, _, _ in points] == list(range(993, 1003))
    assert {t: (ok, failed) for t, ok, failed in points if (ok, failed) != (0, 0)} == {
        995: (1, 0),
        1000: (1, 0),
    }


def test_a_new_throughput_reports_zero_for_every_second() -> None:
    assert Throughput().points(50.0, 3) == [(48, 0, 0), (49, 0, 0), (50, 0, 0)]


def test_a_window_larger_than_the_span_is_cut_to_the_span() -> None:
    throughput = Throughput()
    throughput.add(1000.0, ok=True)

    points = throughput.points(1000.0, 10 * THROUGHPUT_SPAN)

    assert len(points) == THROUGHPUT_SPAN == 600
    assert points[0][0] == 1000 - 599
    assert points[-1] == (1000, 1, 0)


def test_a_zero_or_negative_window_gives_no_points() -> None:
    throughput = Throughput()
    throughput.add(1000.0, ok=True)

    assert throughput.points(1000.0, 0) == []
    assert throughput.points(1000.0, -5) == []


def test_a_second_is_still_reported_until_it_is_span_seconds_old() -> None:
    throughput = Throughput()
    throughput.add(1000.0, ok=True)

    assert throughput.points(1599.0, 600)[0] == (1000, 1, 0)
    assert throughput.points(1600.0, 600)[0] == (1001, 0, 0)


def test_a_second_600_seconds_later_reuses_the_slot_and_forgets_the_old_counts() -> None:
    throughput = Throughput()
    throughput.add(1000.0, ok=True)
    throughput.add(1000.0, ok=False)

    throughput.add(1600.0, ok=True)  # the same slot as second 1000

    assert throughput.points(1600.0, 1) == [(1600, 1, 0)]
    assert throughput.points(1600.0, 600).count((1600, 1, 0)) == 1
    assert sum(ok + failed for _, ok, failed in throughput.points(1600.0, 600)) == 1


def test_a_slot_left_over_from_a_previous_lap_reads_as_zero() -> None:
    throughput = Throughput()
    throughput.add(1000.0, ok=True)

    # Nothing finished in 1001..2000; second 1600 and 2200 share the old slot.
    assert throughput.points(1600.0, 1) == [(1600, 0, 0)]
    assert throughput.points(2200.0, 600) == [(t, 0, 0) for t in range(1601, 2201)]


def test_a_small_span_wraps_around_after_span_seconds() -> None:
    throughput = Throughput(span=3)
    for second in (10.0, 11.0, 12.0, 13.0):
        throughput.add(second, ok=True)
    throughput.add(13.5, ok=False)

    assert throughput.points(13.0, 10) == [(11, 1, 0), (12, 1, 0), (13, 1, 1)]


def test_a_window_ending_before_later_finishes_does_not_see_them() -> None:
    throughput = Throughput()
    throughput.add(1400.0, ok=True)

    assert throughput.points(1000.0, 600) == [(t, 0, 0) for t in range(401, 1001)]


# --- TaskStats on its own -----------------------------------------------------------------


def histogram_numbers(histogram: Histogram | None) -> tuple[int, float]:
    assert histogram is not None
    return histogram.count, histogram.sum


def test_counts_are_kept_per_tally_name_and_priority() -> None:
    stats = TaskStats()

    stats.line("add", "normal").submitted += 2
    stats.line("add", "high").submitted += 1
    stats.line("mul", "normal").retried += 1

    assert stats.counts == {
        (Tally.SUBMITTED, "add", "normal"): 2,
        (Tally.SUBMITTED, "add", "high"): 1,
        (Tally.RETRIED, "mul", "normal"): 1,
    }


def test_one_name_and_priority_always_gets_the_same_line() -> None:
    stats = TaskStats()

    assert stats.line("add", "normal") is stats.line("add", "normal")
    assert stats.line("add", "normal") is not stats.line("add", "high")


def test_a_start_counts_and_records_its_queue_wait() -> None:
    stats = TaskStats()

    stats.started(stats.line("add", "normal"), 2.5)
    stats.started(stats.line("add", "normal"), 0.5)

    assert stats.counts[Tally.STARTED, "add", "normal"] == 2
    assert histogram_numbers(stats.queue_wait.get(("add", "normal"))) == (2, 3.0)
    assert stats.run_time == {}


def test_a_negative_queue_wait_is_clamped_to_zero() -> None:
    stats = TaskStats()

    stats.started(stats.line("add", "normal"), -3.0)

    histogram = stats.queue_wait["add", "normal"]
    assert (histogram.count, histogram.sum, histogram.counts[0]) == (1, 0.0, 1)


def test_a_negative_run_time_is_clamped_to_zero() -> None:
    stats = TaskStats()

    stats.ran(stats.line("add", "low"), -0.25)

    histogram = stats.run_time["add", "low"]
    assert (histogram.count, histogram.sum, histogram.counts[0]) == (1, 0.0, 1)


def test_run_times_are_kept_per_name_and_priority_without_counting_a_tally() -> None:
    stats = TaskStats()

    stats.ran(stats.line("add", "normal"), 1.0)
    stats.ran(stats.line("add", "high"), 2.0)

    assert histogram_numbers(stats.run_time.get(("add", "normal"))) == (1, 1.0)
    assert histogram_numbers(stats.run_time.get(("add", "high"))) == (1, 2.0)
    assert not stats.counts


def test_successes_and_failures_count_in_throughput_at_their_finish_time() -> None:
    stats = TaskStats()
    line = stats.line("add", "normal")

    stats.finished(line, Tally.SUCCEEDED, 1000.2)
    stats.finished(line, Tally.FAILED, 1000.7)
    stats.finished(line, Tally.FAILED, 1001.0)

    assert stats.counts[Tally.SUCCEEDED, "add", "normal"] == 1
    assert stats.counts[Tally.FAILED, "add", "normal"] == 2
    assert stats.throughput.points(1001.0, 2) == [(1000, 1, 1), (1001, 0, 1)]


def test_cancelled_tasks_are_counted_but_not_in_throughput() -> None:
    stats = TaskStats()

    stats.finished(stats.line("add", "normal"), Tally.CANCELLED, 1000.0)

    assert stats.counts[Tally.CANCELLED, "add", "normal"] == 1
    assert stats.throughput.points(1000.0, 1) == [(1000, 0, 0)]


def test_totals_name_every_tally_and_sum_over_names_and_priorities() -> None:
    stats = TaskStats()
    stats.line("add", "normal").submitted += 1
    stats.line("mul", "high").submitted += 1
    stats.finished(stats.line("add", "normal"), Tally.SUCCEEDED, NOW)

    totals = stats.totals()

    assert totals == {
        "submitted": 2,
        "started": 0,
        "succeeded": 1,
        "failed": 0,
        "retried": 0,
        "cancelled": 0,
    }
    assert all(type(key) is str for key in totals)


def test_the_totals_of_new_stats_are_all_zero() -> None:
    assert TaskStats().totals() == dict.fromkeys(
        ("submitted", "started", "succeeded", "failed", "retried", "cancelled"), 0
    )


# --- what the board records -----------------------------------------------------------------


def board_with(*workers: str, max_redeliveries: int = 3) -> TaskBoard:
    board = TaskBoard(BoardConfig(max_redeliveries=max_redeliveries), entropy=counting(ceiling))
    for worker_id in workers:
        board.register(worker_id, f"host-{worker_id}", 4, [ADD, FLAKY], NOW)
    return board


def ceiling(low: float, high: float) -> float:
    return high


def submit(
    board: TaskBoard,
    *task_ids: str,
    name: str = "add",
    priority: Priority = Priority.NORMAL,
    now: float = NOW,
) -> None:
    args = [1] if name == "add" else []
    board.submit([TaskSpec(name=name, id=t, args=args) for t in task_ids], priority, now)


def dispatched(board: TaskBoard, worker_id: str = "w1") -> list[str]:
    return [a.id for a in board.dispatch([worker_id])[0].get(worker_id, [])]


def failure(task_id: str, started: float | None = None, finished: float | None = None) -> Outcome:
    error = TaskError(type="RuntimeError", message="boom")
    return Outcome(task_id=task_id, ok=False, error=error, started_at=started, finished_at=finished)


def count(board: TaskBoard, tally: Tally, name: str = "add", priority: str = "normal") -> int:
    return board.stats.counts[tally, name, priority]


def test_an_accepted_submission_is_counted_under_its_name_and_priority() -> None:
    board = board_with("w1")

    submit(board, "t1", "t2")
    submit(board, "t3", priority=Priority.HIGH)

    assert count(board, Tally.SUBMITTED) == 2
    assert count(board, Tally.SUBMITTED, priority="high") == 1
    assert board.stats.totals()["started"] == 0


def test_a_duplicate_submission_by_id_is_not_counted_twice() -> None:
    board = board_with("w1")
    submit(board, "t1")

    submit(board, "t1")  # a client retry while the task is live
    board.submit_each([TaskSpec(name="add", id="t1", args=[1])], Priority.NORMAL, NOW)

    assert count(board, Tally.SUBMITTED) == 1


def test_resubmitting_a_finished_task_by_id_is_not_counted_again() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)
    board.report("w1", [], [Outcome(task_id="t1", ok=True, result=2)], NOW + 1)

    submit(board, "t1", now=NOW + 2)

    assert count(board, Tally.SUBMITTED) == 1
    assert count(board, Tally.SUCCEEDED) == 1


def test_a_rejected_submission_is_not_counted() -> None:
    board = board_with("w1")

    with pytest.raises(Rejected):
        board.submit(
            [TaskSpec(name="add", id="ok", args=[1]), TaskSpec(name="nope", id="bad")],
            Priority.NORMAL,
            NOW,
        )
    board.submit_each(
        [TaskSpec(name="add", id="good", args=[1]), TaskSpec(name="add", id="bad", args=[])],
        Priority.NORMAL,
        NOW,
    )

    assert board.stats.counts == {(Tally.SUBMITTED, "add", "normal"): 1}


def test_a_start_report_counts_a_start_and_the_wait_since_queued() -> None:
    board = board_with("w1")
    submit(board, "t1", priority=Priority.LOW)
    dispatched(board)

    board.report("w1", ["t1"], [], NOW + 3)
    board.report("w1", ["t1"], [], NOW + 4)  # repeated: the task is already running

    assert count(board, Tally.STARTED, priority="low") == 1
    assert histogram_numbers(board.stats.queue_wait.get(("add", "low"))) == (1, 3.0)


def test_an_outcome_without_a_start_report_counts_the_start_at_the_outcomes_started_at() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    outcome = Outcome(task_id="t1", ok=True, started_at=NOW + 2, finished_at=NOW + 2.5)
    board.report("w1", [], [outcome], NOW + 3)

    assert count(board, Tally.STARTED) == 1
    assert histogram_numbers(board.stats.queue_wait.get(("add", "normal"))) == (1, 2.0)
    assert histogram_numbers(board.stats.run_time.get(("add", "normal"))) == (1, 0.5)


def test_an_outcome_without_any_times_counts_its_start_and_a_zero_run_at_report_time() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    board.report("w1", [], [Outcome(task_id="t1", ok=True)], NOW + 4)

    assert count(board, Tally.STARTED) == 1
    assert histogram_numbers(board.stats.queue_wait.get(("add", "normal"))) == (1, 4.0)
    assert histogram_numbers(board.stats.run_time.get(("add", "normal"))) == (1, 0.0)


def test_the_run_time_comes_from_the_outcomes_own_clock_not_the_boards() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)
    board.report("w1", ["t1"], [], NOW + 1)

    outcome = Outcome(task_id="t1", ok=True, started_at=500.0, finished_at=500.75)
    board.report("w1", [], [outcome], NOW + 60)

    assert histogram_numbers(board.stats.run_time.get(("add", "normal"))) == (1, 0.75)
    assert count(board, Tally.STARTED) == 1  # the start report already counted it


def test_without_outcome_times_the_run_time_is_measured_from_the_start_report() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)
    board.report("w1", ["t1"], [], NOW + 1)

    board.report("w1", [], [Outcome(task_id="t1", ok=True, started_at=NOW + 1)], NOW + 4)

    assert histogram_numbers(board.stats.run_time.get(("add", "normal"))) == (1, 3.0)


def test_an_outcome_finishing_before_it_started_records_a_zero_run_time() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    outcome = Outcome(task_id="t1", ok=True, started_at=NOW + 5, finished_at=NOW + 4)
    board.report("w1", [], [outcome], NOW + 6)

    histogram = board.stats.run_time["add", "normal"]
    assert (histogram.count, histogram.sum, histogram.counts[0]) == (1, 0.0, 1)


def test_a_start_before_the_task_was_queued_records_a_zero_queue_wait() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    outcome = Outcome(task_id="t1", ok=True, started_at=NOW - 2, finished_at=NOW - 1)
    board.report("w1", [], [outcome], NOW + 1)  # the subworker's clock is behind

    histogram = board.stats.queue_wait["add", "normal"]
    assert (histogram.count, histogram.sum) == (1, 0.0)


def test_a_success_is_counted_and_adds_to_throughput_at_the_report_time() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    board.report("w1", [], [Outcome(task_id="t1", ok=True)], NOW + 2.5)

    assert count(board, Tally.SUCCEEDED) == 1
    assert board.stats.throughput.points(NOW + 3, 2) == [(1002, 1, 0), (1003, 0, 0)]


def test_a_failure_without_retries_is_counted_as_failed_and_in_throughput() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    board.report("w1", [], [failure("t1", NOW + 1, NOW + 2)], NOW + 2)

    assert (count(board, Tally.FAILED), count(board, Tally.RETRIED)) == (1, 0)
    assert board.stats.throughput.points(NOW + 2, 1) == [(1002, 0, 1)]
    assert histogram_numbers(board.stats.run_time.get(("add", "normal"))) == (1, 1.0)


def test_a_retried_then_successful_task_counts_one_success_two_retries_and_three_starts() -> None:
    board = board_with("w1")
    submit(board, "r", name="flaky")
    dispatched(board)
    board.report("w1", ["r"], [], NOW + 1)  # waited 1 s
    board.report("w1", [], [failure("r", NOW + 1, NOW + 1.5)], NOW + 2)
    assert board.release_due(NOW + 3).queued == 1  # first backoff: 1 s
    dispatched(board)
    board.report("w1", ["r"], [], NOW + 5)  # waited 2 s since it was queued again
    board.report("w1", [], [failure("r", NOW + 5, NOW + 5.25)], NOW + 6)
    assert board.release_due(NOW + 8).queued == 1  # second backoff: 2 s
    dispatched(board)

    success = Outcome(task_id="r", ok=True, started_at=NOW + 8.5, finished_at=NOW + 9.5)
    board.report("w1", [], [success], NOW + 10)  # no start report: waited 0.5 s

    assert {str(t): count(board, t, "flaky") for t in Tally} == {
        "submitted": 1,
        "started": 3,
        "succeeded": 1,
        "failed": 0,
        "retried": 2,
        "cancelled": 0,
    }
    assert histogram_numbers(board.stats.queue_wait.get(("flaky", "normal"))) == (3, 3.5)
    assert histogram_numbers(board.stats.run_time.get(("flaky", "normal"))) == (3, 1.75)
    assert sum(ok + failed for _, ok, failed in board.stats.throughput.points(NOW + 10, 20)) == 1


def test_a_task_failing_after_its_retries_counts_its_retries_and_one_failure() -> None:
    board = board_with("w1")
    submit(board, "r", name="flaky")
    for attempt_at, due in ((NOW + 1, NOW + 2), (NOW + 3, NOW + 5), (NOW + 6, None)):
        dispatched(board)
        board.report("w1", [], [failure("r")], attempt_at)
        if due is not None:
            assert board.release_due(due).queued == 1

    assert (count(board, Tally.RETRIED, "flaky"), count(board, Tally.FAILED, "flaky")) == (2, 1)
    assert count(board, Tally.STARTED, "flaky") == 3
    assert board.stats.throughput.points(NOW + 6, 7) == [
        (1000, 0, 0),
        (1001, 0, 0),
        (1002, 0, 0),
        (1003, 0, 0),
        (1004, 0, 0),
        (1005, 0, 0),
        (1006, 0, 1),
    ]


def test_a_cancelled_queued_task_is_counted_but_never_started_nor_in_throughput() -> None:
    board = board_with("w1")
    submit(board, "t1")

    board.cancel("t1", NOW + 1)
    board.cancel("t1", NOW + 2)  # already final: not counted again

    assert count(board, Tally.CANCELLED) == 1
    assert count(board, Tally.STARTED) == 0
    assert board.stats.throughput.points(NOW + 2, 3) == [(t, 0, 0) for t in (1000, 1001, 1002)]


def test_the_outcome_of_a_task_cancelled_while_running_is_not_recorded() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)
    board.report("w1", ["t1"], [], NOW + 1)
    board.cancel("t1", NOW + 2)

    board.report(
        "w1", [], [Outcome(task_id="t1", ok=True, started_at=NOW + 1, finished_at=NOW + 3)], NOW + 3
    )

    assert count(board, Tally.CANCELLED) == 1
    assert count(board, Tally.SUCCEEDED) == 0
    assert board.stats.run_time == {}


def test_a_redelivered_task_counts_another_start_waiting_from_its_redelivery() -> None:
    board = board_with("w1", "w2")
    submit(board, "t1")
    dispatched(board, "w1")
    board.report("w1", ["t1"], [], NOW + 1)

    board.remove_worker("w1", NOW + 10)
    dispatched(board, "w2")
    board.report("w2", ["t1"], [], NOW + 12)

    assert count(board, Tally.STARTED) == 2
    assert count(board, Tally.RETRIED) == 0
    assert histogram_numbers(board.stats.queue_wait.get(("add", "normal"))) == (2, 3.0)


def test_an_interrupted_attempt_records_its_run_time_and_is_not_a_retry() -> None:
    board = board_with("w1")
    submit(board, "t1")
    dispatched(board)

    interrupted = Outcome(
        task_id="t1", ok=False, requeue=True, started_at=NOW + 1, finished_at=NOW + 1.5
    )
    board.report("w1", [], [interrupted], NOW + 2)

    assert histogram_numbers(board.stats.run_time.get(("add", "normal"))) == (1, 0.5)
    assert (count(board, Tally.RETRIED), count(board, Tally.FAILED)) == (0, 0)
    assert dispatched(board) == ["t1"]


def test_a_task_lost_too_often_is_counted_as_failed() -> None:
    board = board_with("w1", max_redeliveries=0)
    submit(board, "t1")
    dispatched(board)
    board.report("w1", ["t1"], [], NOW + 1)

    board.remove_worker("w1", NOW + 5)

    assert count(board, Tally.FAILED) == 1
    assert board.stats.throughput.points(NOW + 5, 1) == [(1005, 0, 1)]


def test_a_delayed_task_waits_in_the_queue_from_when_it_became_due() -> None:
    board = board_with("w1")
    board.submit([TaskSpec(name="add", id="d", args=[1], eta=NOW + 10)], Priority.NORMAL, NOW)
    assert board.release_due(NOW + 12).queued == 1
    dispatched(board)

    board.report("w1", ["d"], [], NOW + 13)

    assert histogram_numbers(board.stats.queue_wait.get(("add", "normal"))) == (1, 1.0)
