"""The dashboard's views of named queues and limits: plain documents for the HTTP API and
the event stream."""

from __future__ import annotations

import pytest
from view_world import NOW, add, dispatched, is_json, make_engine, submit

from fastworker_control_plane.core.limits import Scope
from fastworker_control_plane.core.queue_controls import pause, set_limit
from fastworker_control_plane.dashboard import views
from fastworker_control_plane.engine import Engine
from fastworker_protocol import Priority, TaskSpec


@pytest.fixture
def engine() -> Engine:
    return make_engine()


# --- named queues and limits -----------------------------------------------------------------


def to_reports(task_id: str) -> TaskSpec:
    return TaskSpec(name="add", id=task_id, args=[1], queue="reports")


def test_queues_lists_each_named_queue_with_its_depth_per_priority_and_state(
    engine: Engine,
) -> None:
    # Given two tasks queued on "reports" (which no worker serves) and one running on default
    submit(engine, to_reports("r1"))
    submit(engine, to_reports("r2"), priority=Priority.HIGH)
    submit(engine, add("d1"))
    dispatched(engine)
    # When "reports" is paused and limited
    pause(engine.board, "reports", True)
    set_limit(engine.board, Scope.QUEUE, "reports", "10/s", 2)

    document = views.queues(engine, NOW + 5)

    # Then
    assert document == [
        {
            "name": "default",
            "depth": {"critical": 0, "high": 0, "normal": 0, "low": 0},
            "oldest_age": None,
            "running": 1,
            "workers": 1,
            "paused": False,
            "rate_limit": None,
            "concurrency_limit": None,
            "waiting_on_limits": 0,
        },
        {
            "name": "reports",
            "depth": {"critical": 0, "high": 1, "normal": 1, "low": 0},
            "oldest_age": 5.0,
            "running": 0,
            "workers": 0,
            "paused": True,
            "rate_limit": "10/s",
            "concurrency_limit": 2,
            "waiting_on_limits": 0,
        },
    ]
    assert is_json(document)


def test_limits_lists_the_limits_in_effect_and_leaves_lifted_ones_out(engine: Engine) -> None:
    set_limit(engine.board, Scope.QUEUE, "reports", "10/s", 2)
    set_limit(engine.board, Scope.TASK, "add", None, 3)
    set_limit(engine.board, Scope.QUEUE, "reports", "off", 0)  # lifted again

    document = views.limits(engine, NOW)

    assert document == [
        {
            "scope": "task",
            "name": "add",
            "rate_limit": None,
            "concurrency_limit": 3,
            "concurrency_key": None,
            "overridden": True,
            "running": 0,
            "waiting": 0,
        }
    ]
    assert is_json(document)


def test_a_queue_acted_on_says_whether_it_is_paused_and_how_many_tasks_were_purged(
    engine: Engine,
) -> None:
    pause(engine.board, "reports", True)

    assert views.queue_acted(engine, "reports", 3) == {
        "queue": "reports",
        "paused": True,
        "purged": 3,
    }
    assert views.queue_acted(engine, "default") == {
        "queue": "default",
        "paused": False,
        "purged": 0,
    }


def test_the_streams_queue_state_is_the_queues_and_the_limits(engine: Engine) -> None:
    submit(engine, to_reports("r1"))
    set_limit(engine.board, Scope.TASK, "add", "5/m", None)

    document = views.queue_state(engine, NOW + 1)

    assert document == {
        "queues": views.queues(engine, NOW + 1),
        "limits": views.limits(engine, NOW + 1),
    }
    assert [q["name"] for q in document["queues"]] == ["default", "reports"]
    assert is_json(document)
