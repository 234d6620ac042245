"""The world the view tests share: an engine on a fake clock with one subworker, and
helpers to submit and dispatch on it."""

from __future__ import annotations

import msgspec

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.dashboard import views
from fastworker_control_plane.engine import Engine
from fastworker_protocol import Param, Priority, TaskSignature, TaskSpec

NOW = 1000.0
ME = views.Identity(instance_id="cp-1", started_at=990.0)
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])
FLAKY = TaskSignature(name="flaky", max_retries=1, retry_backoff=1.0)


class FakeClock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ceiling(low: float, high: float) -> float:
    return high


def make_engine(config: BoardConfig | None = None) -> Engine:
    board = TaskBoard(config, uniform=ceiling)
    board.register("w1", "host-w1", 4, [ADD, FLAKY], NOW)
    return Engine(board, heartbeat_timeout=10.0, clock=FakeClock())


def submit(engine: Engine, *specs: TaskSpec, priority: Priority = Priority.NORMAL) -> None:
    engine.board.submit(list(specs), priority, NOW)


def add(task_id: str, eta: float | None = None) -> TaskSpec:
    return TaskSpec(name="add", id=task_id, args=[1], eta=eta)


def dispatched(engine: Engine, worker_id: str = "w1") -> list[str]:
    return [a.id for a in engine.board.dispatch([worker_id]).get(worker_id, [])]


def is_json(document: object) -> bool:
    """The routes encode documents with msgspec: they must round-trip through JSON."""
    decoded: object = msgspec.json.decode(msgspec.json.encode(document))
    builtins: object = msgspec.to_builtins(document)
    return decoded == builtins
