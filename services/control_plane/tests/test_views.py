"""The JSON documents of the HTTP API (docs/http-api.md), built from a real engine and task
board with explicit ``now`` values; no HTTP."""

from __future__ import annotations

import msgspec
import pytest
from view_world import (
    ADD,
    FLAKY,
    ME,
    NOW,
    FakeClock,
    add,
    dispatched,
    is_json,
    make_engine,
    submit,
)

from fastworker import __version__
from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.dashboard import views
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.events import Event
from fastworker_protocol import (
    MAX_NESTING,
    Outcome,
    Priority,
    TaskError,
    TaskResult,
    TaskSignature,
    TaskSpec,
    TaskState,
)

TICK = TaskSignature(name="tick", repeat_interval=5.0)
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture
def engine() -> Engine:
    return make_engine()


# --- overview ---------------------------------------------------------------------------------


def test_the_overview_of_an_idle_control_plane(engine: Engine) -> None:
    document = views.overview(engine, ME)

    assert document == {
        "instance_id": "cp-1",
        "version": __version__,
        "started_at": 990.0,
        "queues": {"critical": 0, "high": 0, "normal": 0, "low": 0},
        "scheduled": 0,
        "in_flight": 0,
        "workers": 1,
        "totals": {
            "submitted": 0,
            "started": 0,
            "succeeded": 0,
            "failed": 0,
            "retried": 0,
            "cancelled": 0,
        },
        "results": {"size": 0, "bytes": 0, "hits": 0, "misses": 0, "evictions": 0},
        "events": {"published": 0, "dropped": 0},
    }
    assert list(document["queues"]) == ["critical", "high", "normal", "low"]
    assert is_json(document)


def test_the_overview_counts_queues_scheduled_in_flight_totals_and_the_cache() -> None:
    engine = make_engine(BoardConfig(result_max_size=1))
    engine.board.register("w2", "host-w2", 1, [ADD], NOW)
    submit(engine, add("a"), add("b"))
    dispatched(engine, "w1")  # a and b are in flight on w1
    engine.board.report("w1", ["a"], [Outcome(task_id="a", ok=True)], NOW + 1)
    engine.board.report("w1", [], [Outcome(task_id="b", ok=True)], NOW + 1)  # evicts a
    submit(engine, add("h"), priority=Priority.HIGH)
    submit(engine, add("l1"), add("l2"), priority=Priority.LOW)
    submit(engine, add("later", eta=NOW + 60))
    engine.board.get("b", NOW + 1)
    engine.board.get("a", NOW + 1)
    engine.board.cancel("l2", NOW + 1)
    dispatched(engine, "w2")  # h, the most urgent

    document = views.overview(engine, ME)

    assert document["queues"] == {"critical": 0, "high": 0, "normal": 0, "low": 1}
    assert (document["scheduled"], document["in_flight"], document["workers"]) == (1, 1, 2)
    assert document["totals"] == {
        "submitted": 6,
        "started": 2,
        "succeeded": 2,
        "failed": 0,
        "retried": 0,
        "cancelled": 1,
    }
    cache = engine.board.results
    assert cache.bytes > 0
    assert document["results"] == {
        "size": 1,
        "bytes": cache.bytes,
        "hits": 1,
        "misses": 1,
        "evictions": 2,
    }


def test_the_overview_reports_the_event_bus_counters(engine: Engine) -> None:
    engine.events.subscribe(backlog=1)
    effects = submit(engine, add("a"), add("b"))
    engine.events.publish(effects.changes, NOW)

    assert views.overview(engine, ME)["events"] == {"published": 2, "dropped": 1}


# --- workers ----------------------------------------------------------------------------------


def test_workers_lists_each_subworker_with_its_last_heartbeat(engine: Engine) -> None:
    engine.board.register("local", "embedded", 2, [ADD], NOW + 1, local=True)
    submit(engine, add("a"))
    dispatched(engine, "w1")
    engine.board.touch("w1", NOW + 2)

    document = views.workers(engine, NOW + 2.5)

    assert document == [
        {
            "worker_id": "w1",
            "name": "host-w1",
            "state": "running",
            "concurrency": 4,
            "in_flight": 1,
            "completed": 0,
            "tasks": ["add", "flaky"],
            "last_seen_ago": 0.5,
            "last_heartbeat": NOW + 2,
            "local": False,
            "queues": {"default": 1},
        },
        {
            "worker_id": "local",
            "name": "embedded",
            "state": "running",
            "concurrency": 2,
            "in_flight": 0,
            "completed": 0,
            "tasks": ["add"],
            "last_seen_ago": 1.5,
            "last_heartbeat": NOW + 1,
            "local": True,
            "queues": {"default": 1},
        },
    ]
    assert is_json(document)


def test_workers_is_empty_without_subworkers() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10.0, clock=FakeClock())

    assert views.workers(engine, NOW) == []


# --- tasks ------------------------------------------------------------------------------------


def test_a_finished_tasks_summary_has_its_times_and_duration(engine: Engine) -> None:
    submit(engine, add("a"), priority=Priority.HIGH)
    dispatched(engine)
    engine.board.report("w1", ["a"], [], NOW + 1)
    engine.board.report("w1", [], [Outcome(task_id="a", ok=True, result=2)], NOW + 1.25)
    result = engine.board.get("a", NOW + 2)
    assert result is not None

    document = views.task_summary(result)

    assert document == {
        "task_id": "a",
        "name": "add",
        "status": "success",
        "priority": "high",
        "attempts": 1,
        "worker_id": "w1",
        "submitted_at": NOW,
        "started_at": NOW + 1,
        "finished_at": NOW + 1.25,
        "duration": 0.25,
        "error": None,
    }
    assert is_json(document)


def test_a_task_not_yet_finished_has_no_duration(engine: Engine) -> None:
    submit(engine, add("a"), add("b"))
    dispatched(engine)
    engine.board.report("w1", ["a"], [], NOW + 1)

    running, queued = engine.board.get("a", NOW + 1), engine.board.get("b", NOW + 1)
    assert running is not None
    assert queued is not None

    assert views.task_summary(running)["duration"] is None
    assert views.task_summary(queued)["started_at"] is None
    assert views.task_summary(queued)["duration"] is None


def test_a_cancelled_task_that_never_started_has_no_duration(engine: Engine) -> None:
    submit(engine, add("a"))
    result, _ = engine.board.cancel("a", NOW + 1)

    document = views.task_summary(result)

    assert (document["status"], document["finished_at"], document["duration"]) == (
        "cancelled",
        NOW + 1,
        None,
    )


def test_a_duration_across_a_clock_step_back_is_clamped_to_zero() -> None:
    result = TaskResult(
        task_id="a", name="add", status=TaskState.SUCCESS, started_at=NOW + 5, finished_at=NOW
    )

    assert views.task_summary(result)["duration"] == 0.0


def test_a_failed_tasks_summary_has_its_error_without_the_traceback() -> None:
    error = TaskError(type="ValueError", message="bad", traceback="Traceback ...")
    result = TaskResult(task_id="a", name="add", status=TaskState.FAILURE, error=error)

    assert views.task_summary(result)["error"] == {
        "type": "ValueError",
        "message": "bad",
        "reason": "exception",
    }


def test_a_tasks_detail_adds_arguments_result_eta_and_its_trace_id() -> None:
    engine = make_engine(BoardConfig(result_keep_arguments=True))
    spec = TaskSpec(
        name="add",
        id="a",
        args=[1],
        kwargs={},
        headers={"traceparent": TRACEPARENT},
        eta=NOW - 1,
    )
    submit(engine, spec)
    dispatched(engine)
    engine.board.report("w1", [], [Outcome(task_id="a", ok=True, result={"sum": 2})], NOW + 1)
    record = engine.board.record("a", NOW + 1, count=False)
    assert record is not None

    document = views.task_detail(record)

    assert document == {
        **views.task_summary(record.snapshot()),
        "error": None,
        "arguments_kept": True,
        "args": [1],
        "kwargs": {},
        "result": {"sum": 2},
        "attempt_errors": [],
        "eta": NOW - 1,
        "trace_id": TRACE_ID,
        "retry_of": None,
    }
    assert is_json(document)


def nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def test_a_tasks_detail_of_any_value_is_json_deep_results_cut_at_the_nesting_limit() -> None:
    engine = make_engine(BoardConfig(result_keep_arguments=True))
    ext = msgspec.msgpack.Ext(7, b"opaque")
    deepest_admitted = nested(MAX_NESTING - 2)  # in a list in the args array: the limit
    submit(engine, TaskSpec(name="add", id="a", args=[[deepest_admitted, ext]]))
    dispatched(engine)
    engine.board.report("w1", [], [Outcome(task_id="a", ok=True, result=nested(900))], NOW + 1)
    record = engine.board.record("a", NOW + 1, count=False)
    assert record is not None

    document = views.task_detail(record)

    assert document["args"] == [[deepest_admitted, "ext(7, 6 bytes)"]]  # the whole of it
    cut = document["result"]
    for _ in range(MAX_NESTING):  # a subworker's result may nest deeper: cut, not a 500
        assert isinstance(cut, list)
        cut = cut[0]
    assert cut == "..."
    msgspec.json.encode(document)


def test_a_finished_tasks_detail_says_its_arguments_were_not_kept(engine: Engine) -> None:
    # Given a task called with arguments, on a board that does not keep them
    submit(engine, TaskSpec(name="add", id="a", kwargs={"x": 1}))
    queued = engine.board.record("a", NOW, count=False)
    assert queued is not None
    assert views.task_detail(queued)["kwargs"] == {"x": 1}  # a live task still has them

    # When it finishes
    dispatched(engine)
    engine.board.report("w1", [], [Outcome(task_id="a", ok=True, result=3)], NOW + 1)
    record = engine.board.record("a", NOW + 1, count=False)
    assert record is not None
    document = views.task_detail(record)

    # Then its detail says so, rather than showing a call without arguments
    assert document["arguments_kept"] is False
    assert (document["args"], document["kwargs"], document["result"]) == (None, None, 3)
    assert is_json(document)


def test_a_task_without_a_traceparent_has_no_trace_id(engine: Engine) -> None:
    submit(engine, add("a"))
    record = engine.board.record("a", NOW, count=False)
    assert record is not None

    document = views.task_detail(record)

    assert (document["trace_id"], document["result"], document["eta"]) == (None, None, None)


def test_a_retried_tasks_detail_lists_every_attempts_error_with_tracebacks(
    engine: Engine,
) -> None:
    submit(engine, TaskSpec(name="flaky", id="r"))
    for at in (NOW + 1, NOW + 3):
        dispatched(engine)
        error = TaskError(type="OSError", message=f"at {at}", traceback=f"tb {at}")
        engine.board.report("w1", [], [Outcome(task_id="r", ok=False, error=error)], at)
        engine.board.release_due(at + 1)
    record = engine.board.record("r", NOW + 3, count=False)
    assert record is not None

    document = views.task_detail(record)

    assert document["status"] == "failure"
    assert document["attempts"] == 2
    assert document["attempt_errors"] == [
        {
            "type": "OSError",
            "message": "at 1001.0",
            "reason": "exception",
            "traceback": "tb 1001.0",
        },
        {
            "type": "OSError",
            "message": "at 1003.0",
            "reason": "exception",
            "traceback": "tb 1003.0",
        },
    ]
    assert document["error"]["traceback"] == "tb 1003.0"
    assert document["error"]["message"].startswith("at 1003.0 (after 2 attempts:")


# --- registered and schedules -------------------------------------------------------------


def test_registered_lists_the_signatures_sorted_by_name_as_plain_data() -> None:
    engine = Engine(TaskBoard(), heartbeat_timeout=10.0, clock=FakeClock())
    engine.board.register("w1", "host-w1", 1, [FLAKY, ADD], NOW)

    document = views.registered(engine)

    assert [s["name"] for s in document] == ["add", "flaky"]
    assert document[0] == {
        "name": "add",
        "params": [{"name": "x", "kind": "POSITIONAL_OR_KEYWORD", "has_default": False}],
        "max_retries": 0,
        "retry_backoff": 1.0,
        "retry_backoff_max": 600.0,
        "retry_on": [],
        "timeout": None,
        "repeat_interval": None,
        "cron": None,
        "cron_tz": "UTC",
        "queue": "default",
        "rate_limit": None,
        "concurrency_limit": None,
        "concurrency_key": None,
        "priority": "normal",
        "result_ttl": None,
    }
    assert document[1]["max_retries"] == 1
    assert is_json(document)


def test_schedules_lists_each_periodic_task_with_its_runs(engine: Engine) -> None:
    engine.board.register("w1", "host-w1", 4, [ADD, TICK], NOW)
    assert engine.board.release_due(NOW + 5).queued == 1

    document = views.schedules(engine, NOW + 5)

    assert document == [
        {
            "name": "tick",
            "spec": "every 5 s",
            "next_run": NOW + 10,
            "last_run": NOW + 5,
            "times_run": 1,
            "skipped": 0,
            "running": True,
            "source": "declared",
            "task": "tick",
            "args": [],
            "kwargs": {},
            "priority": "normal",
            "queue": None,
        }
    ]
    assert is_json(document)


def test_schedules_is_empty_without_periodic_tasks(engine: Engine) -> None:
    assert views.schedules(engine, NOW) == []


# --- throughput, events and the snapshot ---------------------------------------------------


def finish(engine: Engine, task_id: str, at: float, *, ok: bool = True) -> None:
    submit(engine, add(task_id))
    dispatched(engine)
    error = None if ok else TaskError(type="E", message="m")
    engine.board.report("w1", [], [Outcome(task_id=task_id, ok=ok, error=error)], at)


def test_throughput_has_one_point_per_second_oldest_first(engine: Engine) -> None:
    finish(engine, "a", NOW + 1.2)
    finish(engine, "b", NOW + 1.7)
    finish(engine, "c", NOW + 3.1, ok=False)

    document = views.throughput(engine, NOW + 3.5, 4)

    assert document == {
        "interval": 1.0,
        "points": [
            {"t": 1000, "succeeded": 0, "failed": 0},
            {"t": 1001, "succeeded": 2, "failed": 0},
            {"t": 1002, "succeeded": 0, "failed": 0},
            {"t": 1003, "succeeded": 0, "failed": 1},
        ],
    }
    assert is_json(document)


def test_throughput_leaves_cancelled_tasks_out(engine: Engine) -> None:
    submit(engine, add("a"))
    engine.board.cancel("a", NOW)

    points = views.throughput(engine, NOW, 1)["points"]

    assert points == [{"t": 1000, "succeeded": 0, "failed": 0}]


def test_a_throughput_window_beyond_the_span_gives_the_whole_span(engine: Engine) -> None:
    finish(engine, "a", NOW)

    points = views.throughput(engine, NOW, 10_000)["points"]

    assert len(points) == 600
    assert points[-1] == {"t": 1000, "succeeded": 1, "failed": 0}


def test_an_event_is_a_plain_document() -> None:
    e = Event("task.running", "a", "add", "w1", 1, NOW)

    assert views.event(e) == {
        "kind": "task.running",
        "task_id": "a",
        "name": "add",
        "worker_id": "w1",
        "attempts": 1,
        "at": NOW,
    }


def test_the_snapshot_is_the_overview_the_workers_and_the_last_seconds_of_throughput(
    engine: Engine,
) -> None:
    finish(engine, "a", NOW + 2.5)
    finish(engine, "b", NOW + 4.1, ok=False)

    document = views.snapshot(engine, ME, NOW + 4.9)

    assert views.SNAPSHOT_THROUGHPUT == 5
    assert document == {
        "overview": views.overview(engine, ME),
        "workers": views.workers(engine, NOW + 4.9),
        "throughput": views.throughput(engine, NOW + 4.9, views.SNAPSHOT_THROUGHPUT)["points"],
    }
    assert document["throughput"] == [
        {"t": 1000, "succeeded": 0, "failed": 0},
        {"t": 1001, "succeeded": 0, "failed": 0},
        {"t": 1002, "succeeded": 1, "failed": 0},
        {"t": 1003, "succeeded": 0, "failed": 0},
        {"t": 1004, "succeeded": 0, "failed": 1},
    ]
    assert is_json(document)


def test_a_snapshot_point_comes_again_updated_while_its_second_fills(engine: Engine) -> None:
    finish(engine, "a", NOW + 0.2)
    first = views.snapshot(engine, ME, NOW + 0.3)["throughput"]
    finish(engine, "b", NOW + 0.8)

    second = views.snapshot(engine, ME, NOW + 1.1)["throughput"]

    assert first[-1] == {"t": 1000, "succeeded": 1, "failed": 0}
    assert second[-2:] == [
        {"t": 1000, "succeeded": 2, "failed": 0},
        {"t": 1001, "succeeded": 0, "failed": 0},
    ]
