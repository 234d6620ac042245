"""The world the view tests share: an engine on a fake clock with one subworker, and
helpers to submit and dispatch on it."""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.effects import Effects
from fastworker_control_plane.core.entropy import counting
from fastworker_control_plane.dashboard import views
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.world import LoopClock, Timer
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

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """A wake-up from the running loop, as far ahead as ``when`` is of ``now``."""
        return LoopClock(self).call_at(when, callback)


def ceiling(low: float, high: float) -> float:
    return high


def make_engine(config: BoardConfig | None = None) -> Engine:
    board = TaskBoard(config)
    board.register("w1", "host-w1", 4, [ADD, FLAKY], NOW)
    return Engine(board, heartbeat_timeout=10.0, clock=FakeClock(), entropy=counting(ceiling))


def submit(engine: Engine, *specs: TaskSpec, priority: Priority = Priority.NORMAL) -> Effects:
    """Submit on the board; the effects with their transitions, to publish."""
    return engine.board.submit(list(specs), priority, NOW, record=True)[1]


def add(task_id: str, eta: float | None = None) -> TaskSpec:
    return TaskSpec(name="add", id=task_id, args=[1], eta=eta)


def dispatched(engine: Engine, worker_id: str = "w1") -> list[str]:
    return [a.id for a in engine.board.dispatch([worker_id])[0].get(worker_id, [])]


def is_json(document: object) -> bool:
    """The routes encode documents with msgspec: they must round-trip through JSON."""
    decoded: object = msgspec.json.decode(msgspec.json.encode(document))
    builtins: object = msgspec.to_builtins(document)
    return decoded == builtins
