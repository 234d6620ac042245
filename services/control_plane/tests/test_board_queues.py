"""TaskBoard with named queues: routing, worker pools, fair share, limits, pause and purge,
and the controls kept across a restart."""

from __future__ import annotations

import random
from typing import Any

import pytest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.core.queue_controls import next_limit_due, pause, purge, set_limit
from fastworker_control_plane.core.queue_views import limit_infos, queue_infos, waiting_on_limits
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.durability.entries import Recorder, Recovered, snapshot
from fastworker_protocol import (
    Assignment,
    Outcome,
    Param,
    Priority,
    TaskSignature,
    TaskSpec,
    TaskState,
)

NOW = 1000.0


def sig(name: str, queue: str = "default", **fields: Any) -> TaskSignature:
    params = [Param(name=p, kind="POSITIONAL_OR_KEYWORD") for p in ("customer_id", "n")]
    return TaskSignature(name=name, params=params, queue=queue, **fields)


EMAIL = sig("email")
REPORT = sig("report", "reports")


def spec(task_id: str, name: str = "email", key: Any = 1, queue: str | None = None) -> TaskSpec:
    """A task whose first argument (``customer_id``) is ``key``."""
    return TaskSpec(name=name, id=task_id, args=[key, 2], queue=queue)


def ids(plan: dict[str, list[Assignment]]) -> dict[str, list[str]]:
    return {worker: [a.id for a in tasks] for worker, tasks in plan.items()}


def finish(board: TaskBoard, worker_id: str, *task_ids: str, now: float = NOW) -> None:
    board.report(worker_id, [], [Outcome(task_id=t, ok=True) for t in task_ids], now)


def test_a_task_goes_to_the_queue_its_registration_names_unless_the_submission_says() -> None:
    board = TaskBoard()
    board.learn_tasks([EMAIL, REPORT])
    board.submit(
        [spec("r", "report"), spec("e"), spec("moved", queue="reports")], Priority.NORMAL, NOW
    )

    assert [board.record(t, NOW).queue for t in ("r", "e", "moved")] == [  # type: ignore[union-attr]
        "reports",
        "default",
        "reports",
    ]
    assert board.get("moved", NOW).queue == "reports"  # type: ignore[union-attr]


def test_a_worker_takes_tasks_only_from_the_queues_it_serves() -> None:
    board = TaskBoard()
    board.register("mail", "h", 4, [EMAIL, REPORT], NOW, queues={"default": 1})
    board.register("rep", "h", 4, [EMAIL, REPORT], NOW, queues={"reports": 1})
    board.submit(
        [spec("e1"), spec("r1", "report"), spec("e2", queue="reports")], Priority.NORMAL, NOW
    )

    assert ids(board.dispatch(["mail", "rep"], NOW)[0]) == {"mail": ["e1"], "rep": ["r1", "e2"]}


def test_without_a_queue_list_a_worker_serves_the_queues_its_tasks_name() -> None:
    board = TaskBoard()
    board.register("w", "h", 1, [REPORT], NOW)
    assert board.workers.get("w").queues == {"reports": 1}  # type: ignore[union-attr]


def test_a_backlog_no_waiting_worker_serves_never_delays_another_queue() -> None:
    board = TaskBoard()
    board.register("rep", "h", 100, [EMAIL, REPORT], NOW, queues={"reports": 1})
    board.learn_tasks([sig("heavy", "heavy")])
    board.submit([spec(f"h{i}", "heavy") for i in range(20_000)], Priority.CRITICAL, NOW)
    board.submit([spec(f"r{i}", "report") for i in range(100)], Priority.LOW, NOW)

    plan = board.dispatch(["rep"], NOW)[0]

    assert len(plan["rep"]) == 100
    assert board.queues.queue_depth("heavy", Priority.CRITICAL) == 20_000


def test_a_worker_shares_its_slots_between_its_queues_by_weight() -> None:
    board = TaskBoard()
    board.register("w", "h", 1, [EMAIL, REPORT], NOW, queues={"reports": 1, "default": 4})
    board.submit([spec(f"r{i}", "report") for i in range(1000)], Priority.NORMAL, NOW)
    board.submit([spec(f"e{i}") for i in range(1000)], Priority.NORMAL, NOW)

    taken = []
    for _ in range(500):
        (task_id,) = ids(board.dispatch(["w"], NOW)[0])["w"]
        taken.append(task_id)
        finish(board, "w", task_id)

    assert sum(t.startswith("e") for t in taken) == 400
    assert sum(t.startswith("r") for t in taken) == 100


def test_priorities_still_order_the_tasks_inside_a_queue() -> None:
    board = TaskBoard()
    board.register("w", "h", 1, [EMAIL], NOW)
    board.submit([spec("normal")], Priority.NORMAL, NOW)
    board.submit([spec("high")], Priority.HIGH, NOW + 1)

    assert ids(board.dispatch(["w"], NOW)[0]) == {"w": ["high"]}


# --- limits ------------------------------------------------------------------------------------


def keyed_board(workers: int = 1, slots: int = 4) -> TaskBoard:
    board = TaskBoard()
    imp = sig("imp", concurrency_limit=1, concurrency_key="customer_id")
    for w in range(workers):
        board.register(f"w{w}", "h", slots, [EMAIL, imp], NOW)
    return board


def test_one_task_per_key_runs_at_once_and_the_others_wait_without_blocking() -> None:
    board = keyed_board()
    board.submit(
        [spec("a1", "imp", "a"), spec("a2", "imp", "a"), spec("b1", "imp", "b"), spec("e")],
        Priority.NORMAL,
        NOW,
    )

    assert ids(board.dispatch(["w0"], NOW)[0]) == {"w0": ["a1", "b1", "e"]}
    assert waiting_on_limits(board, NOW) == {("default", "imp"): 1}
    assert board.dispatch(["w0"], NOW)[0] == {}

    finish(board, "w0", "a1")

    assert ids(board.dispatch(["w0"], NOW)[0]) == {"w0": ["a2"]}
    assert board.queues.depth(Priority.NORMAL) == 0


def test_a_parked_task_can_be_cancelled_and_leaves_its_queue() -> None:
    board = keyed_board()
    board.submit([spec("a1", "imp", "a"), spec("a2", "imp", "a")], Priority.NORMAL, NOW)
    board.dispatch(["w0"], NOW)

    board.cancel("a2", NOW)
    finish(board, "w0", "a1")

    assert board.queues.depth(Priority.NORMAL) == 0
    assert board.dispatch(["w0"], NOW)[0] == {}


def test_a_rate_limit_lets_through_a_burst_then_one_task_per_interval() -> None:
    board = TaskBoard()
    board.register("w", "h", 10, [sig("api", rate_limit="2/s"), EMAIL], NOW)
    board.submit([spec(f"a{i}", "api") for i in range(5)] + [spec("e")], Priority.NORMAL, NOW)

    assert ids(board.dispatch(["w"], NOW)[0]) == {"w": ["a0", "e"]}
    assert board.dispatch(["w"], NOW + 0.4)[0] == {}
    assert next_limit_due(board, NOW + 0.4) == pytest.approx(NOW + 0.5)
    assert ids(board.dispatch(["w"], NOW + 0.5)[0]) == {"w": ["a1"]}


def test_a_queue_concurrency_limit_holds_across_workers() -> None:
    board = TaskBoard()
    for w in ("w1", "w2"):
        board.register(w, "h", 4, [REPORT], NOW)
    set_limit(board, Scope.QUEUE, "reports", None, 3)
    board.submit([spec(f"r{i}", "report") for i in range(10)], Priority.NORMAL, NOW)

    plan = board.dispatch(["w1", "w2"], NOW)[0]

    assert sum(len(tasks) for tasks in plan.values()) == 3
    (info,) = queue_infos(board, NOW)
    assert (info.running, info.concurrency_limit, info.waiting_on_limits) == (3, 3, 7)


def test_raising_a_limit_at_run_time_lets_parked_tasks_go() -> None:
    board = keyed_board()
    board.submit([spec("a1", "imp", "a"), spec("a2", "imp", "a")], Priority.NORMAL, NOW)
    board.dispatch(["w0"], NOW)

    set_limit(board, Scope.TASK, "imp", None, 2)

    assert ids(board.dispatch(["w0"], NOW)[0]) == {"w0": ["a2"]}
    (limit,) = limit_infos(board, NOW)
    assert (limit.concurrency_limit, limit.concurrency_key, limit.overridden) == (
        2,
        "customer_id",
        True,
    )


def test_a_bad_run_time_rate_is_refused() -> None:
    with pytest.raises(Rejected, match="bad rate limit"):
        set_limit(TaskBoard(), Scope.QUEUE, "q", "fast", None)


def test_a_bad_declared_limit_refuses_the_registration() -> None:
    with pytest.raises(Rejected, match="bad task signature"):
        TaskBoard().register("w", "h", 1, [sig("x", rate_limit="1/d")], NOW)


# --- pause and purge ---------------------------------------------------------------------------


def test_pausing_a_queue_stops_its_dispatch_only_and_resuming_restarts_it() -> None:
    board = TaskBoard()
    board.register("w", "h", 4, [EMAIL, REPORT], NOW, queues={"reports": 1, "default": 1})
    board.submit([spec("r", "report"), spec("e")], Priority.NORMAL, NOW)

    assert pause(board, "reports", True)
    assert ids(board.dispatch(["w"], NOW)[0]) == {"w": ["e"]}
    assert pause(board, "reports", False)
    assert ids(board.dispatch(["w"], NOW)[0]) == {"w": ["r"]}
    assert not pause(board, "reports", False)


def test_purging_cancels_only_the_tasks_queued_in_that_queue() -> None:
    board = keyed_board()
    board.learn_tasks([REPORT])
    board.submit(
        [spec("run", "imp", "a"), spec("parked", "imp", "a"), spec("queued", "imp", "b")],
        Priority.NORMAL,
        NOW,
    )
    board.submit([spec("later")], Priority.LOW, NOW)
    board.dispatch(["w0"], NOW)  # run and queued start, parked parks, later starts
    board.submit([spec("waiting"), spec("r", "report")], Priority.NORMAL, NOW)
    board.submit(
        [TaskSpec(name="email", id="eta", args=[1, 2], eta=NOW + 60)], Priority.NORMAL, NOW
    )

    purged = purge(board, "default", NOW).finished

    assert sorted(r.task_id for r in purged) == ["parked", "waiting"]
    assert all(r.status == TaskState.CANCELLED for r in purged)
    assert board.record("run", NOW).state == TaskState.ASSIGNED  # type: ignore[union-attr]
    assert board.record("eta", NOW).state == TaskState.SCHEDULED  # type: ignore[union-attr]
    assert board.record("r", NOW).state == TaskState.QUEUED  # type: ignore[union-attr]
    assert board.queues.queue_depth("default", Priority.NORMAL) == 0


# --- the controls across a restart -------------------------------------------------------------


def test_pauses_and_run_time_limits_come_back_after_a_restart() -> None:
    board = TaskBoard()
    board.learn_tasks([EMAIL])
    recorder = Recorder(BoardView(board))
    pause(board, "reports", True)
    set_limit(board, Scope.QUEUE, "default", "100/s", None)
    set_limit(board, Scope.TASK, "email", None, 2)
    entries = recorder.entries([])  # no transitions: the controls alone

    for journal in (entries, snapshot(board, NOW)):
        recovered = Recovered()
        for entry in journal:
            recovered.apply(entry)
        restored = TaskBoard()
        restored.learn_tasks([EMAIL])
        recovered.restore(restored, NOW)

        assert restored.queues.paused == {"reports"}
        assert {
            (i.scope, i.name, i.rate_limit, i.concurrency_limit) for i in limit_infos(restored, NOW)
        } == {
            ("queue", "default", "100/s", None),
            ("task", "email", None, 2),
        }
    assert recorder.entries([]) == []  # written once


def test_a_limit_on_a_queue_with_a_bad_name_is_refused() -> None:
    with pytest.raises(Rejected, match="bad queue name"):
        set_limit(TaskBoard(), Scope.QUEUE, "no spaces", "1/s", None)


def test_queues_named_by_clients_do_not_outlive_their_tasks() -> None:
    board = TaskBoard()
    board.register("w", "h", 4, [EMAIL], NOW, queues={"q0": 1})
    board.submit([spec(f"t{i}", queue=f"q{i}") for i in range(1000)], Priority.NORMAL, NOW)
    for i in range(1, 1000):
        board.cancel(f"t{i}", NOW)

    assert ids(board.dispatch(["w"], NOW)[0]) == {"w": ["t0"]}
    assert list(board.queues.names()) == []


@pytest.mark.parametrize("seed", range(20))
def test_the_queued_count_matches_the_queued_tasks_whatever_happens(seed: int) -> None:
    rng = random.Random(seed)
    board = keyed_board(workers=2, slots=3)
    board.learn_tasks([REPORT])
    board.register("rep", "h", 2, [REPORT], NOW, queues={"reports": 1})
    made = 0
    for _ in range(300):
        action = rng.random()
        if action < 0.4:
            made += 1
            name = rng.choice(["imp", "email", "report"])
            board.submit([spec(f"t{made}", name, rng.choice("abc"))], Priority.NORMAL, NOW)
        elif action < 0.7:
            board.dispatch(rng.sample(["w0", "w1", "rep"], 2), NOW)
        elif action < 0.9:
            for slot in board.workers:
                finish(board, slot.worker_id, *list(slot.in_flight)[: rng.randrange(3)])
        elif made and board.record(task_id := f"t{rng.randrange(1, made + 1)}", NOW):
            board.cancel(task_id, NOW)
        queued = sum(1 for r in board.live_records() if r.state == TaskState.QUEUED)
        assert len(board.queues) == queued
        assert sum(board.queues.depth(p) for p in Priority) == queued
    for _ in range(1000):  # and every task still gets to run: none is stranded parked
        if not board.live_records():
            break
        board.dispatch(["w0", "w1", "rep"], NOW)
        for slot in board.workers:
            finish(board, slot.worker_id, *slot.in_flight)
    assert board.live_records() == []
