"""The engine's side of the journal: a task whose entry cannot be encoded fails alone,
never taking down the other transitions published with it, nor the request."""

from __future__ import annotations

from pathlib import Path

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.durability.entries import snapshot
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.engine import Engine
from fastworker_protocol import Param, Priority, TaskSignature, TaskSpec

NOW = 1000.0
ECHO = TaskSignature(name="echo", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")])


def nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


def replayed_ids(directory: Path) -> list[str]:
    journal = Journal(directory)
    try:
        return sorted(journal.load().recovered.live)
    finally:
        journal.close_files()


async def test_a_task_the_journal_cannot_encode_does_not_take_its_batch_down(
    tmp_path: Path,
) -> None:
    # Given a durable engine, and three tasks accepted together, one of which holds a
    # value the journal's encoder cannot take (admission may let such a value through)
    board = TaskBoard()
    board.learn_tasks([ECHO])
    engine = Engine(board, heartbeat_timeout=10, clock=lambda: NOW)
    journal = Journal(tmp_path)
    journal.load()
    journal.start(lambda: snapshot(board, NOW))
    engine.keep_journal(journal)
    specs = [TaskSpec(name="echo", id=i, args=[i]) for i in ("a", "b", "c")]
    engine.submit(specs, Priority.NORMAL)
    poisoned = board.record("b", NOW)
    assert poisoned is not None
    poisoned.args = [nested(100_000)]
    # When the batch is published and acknowledged, then nothing raises
    await engine.outbox.durable()
    await journal.close()
    # And the two other tasks are in the journal
    assert replayed_ids(tmp_path) == ["a", "c"]
