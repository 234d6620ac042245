"""Dead letters and per-task result TTLs in the journal: a dead letter is written with
its arguments (``Dead``) and its retry or purge (``DeadGone``); replay and compaction
bring back exactly the store, within its bounds, and results for their own TTL."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from recording_board import RecordingBoard

from fastworker_control_plane.core import dead_letter_ops
from fastworker_control_plane.core.board import BoardConfig, TaskBoard
from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.durability import entries
from fastworker_control_plane.durability.entries import Recorder, Recovered, snapshot
from fastworker_control_plane.durability.schema import Dead, DeadGone, Entry, StoredDead
from fastworker_protocol import (
    DeadLetter,
    FailedFilter,
    Outcome,
    Param,
    Priority,
    TaskError,
    TaskSignature,
    TaskSpec,
)

NOW = 1000.0
DAY = 86_400.0
ECHO = TaskSignature(name="echo", params=[Param(name="value", kind="POSITIONAL_OR_KEYWORD")])
BOOM = TaskError(type="ValueError", message="boom", traceback="Traceback...")


def new_board(**config: Any) -> RecordingBoard:
    board = RecordingBoard(BoardConfig(**config))
    board.register("w", "w", 1000, [ECHO], NOW)
    return board


class Journaled:
    def __init__(self, **config: Any) -> None:
        self.board = new_board(**config)
        self.recorder = Recorder(BoardView(self.board))
        self.entries: list[Entry] = []

    def record(self) -> None:
        effects = self.board.take()
        self.entries += self.recorder.entries(effects.changes, effects.dead_gone)

    def fail(self, *task_ids: str, at: float = NOW) -> None:
        specs = [TaskSpec(name="echo", id=t, args=[{"id": t}], headers={"h": t}) for t in task_ids]
        self.board.submit(specs, Priority.LOW, at)
        self.board.dispatch(["w"], at)
        outcomes = [Outcome(task_id=t, ok=False, error=BOOM) for t in task_ids]
        self.board.report("w", [], outcomes, at)
        self.record()


def replayed(entries: list[Entry], now: float, **config: Any) -> TaskBoard:
    entries = msgspec.msgpack.Decoder(list[Entry]).decode(msgspec.msgpack.encode(entries))
    recovered = Recovered()
    for entry in entries:
        recovered.apply(entry)
    board = TaskBoard(BoardConfig(**config))  # no registration yet, as at a restart
    recovered.restore(board, now)
    return board


def letters(board: TaskBoard, now: float = NOW) -> list[DeadLetter]:
    return dead_letter_ops.listing(board, FailedFilter(), 100, now).tasks


def test_replay_brings_dead_letters_back_with_their_arguments_and_headers() -> None:
    j = Journaled()
    j.fail("a", "b")

    board = replayed(j.entries, NOW + 1)

    assert letters(board, NOW + 1) == letters(j.board, NOW + 1)
    assert [letter.args for letter in letters(board, NOW + 1)] == [[{"id": "b"}], [{"id": "a"}]]
    assert [k.headers for k in board.dead_letters.letters()] == [{"h": "a"}, {"h": "b"}]
    assert sum(isinstance(e, Dead) for e in j.entries) == 2


def test_a_retried_or_purged_dead_letter_stays_gone_after_replay() -> None:
    j = Journaled()
    j.fail("a", "b", "c")
    retried, effects = dead_letter_ops.retry(
        j.board, FailedFilter(task_ids=["a"]), False, NOW, record=True
    )
    j.board.kept.add(effects)
    j.board.kept.add(dead_letter_ops.purge(j.board, FailedFilter(task_ids=["b"]), False, NOW)[1])
    j.record()

    board = replayed(j.entries, NOW + 1)

    assert [letter.task_id for letter in letters(board, NOW + 1)] == ["c"]
    assert [e.task_ids for e in j.entries if isinstance(e, DeadGone)] == [["a", "b"]]
    new = board.get(retried.retried[0].new_task_id, NOW + 1)  # the retry, still queued
    assert new is not None
    assert (new.retry_of, new.status) == ("a", "queued")


def test_a_compacted_journal_holds_the_same_dead_letters() -> None:
    j = Journaled()
    j.fail("a", "b", "c")
    j.board.kept.add(dead_letter_ops.purge(j.board, FailedFilter(task_ids=["b"]), False, NOW)[1])

    board = replayed(snapshot(j.board, NOW), NOW + 1)

    assert letters(board, NOW + 1) == letters(j.board, NOW + 1)
    assert board.dead_letters.bytes == j.board.dead_letters.bytes


def test_replay_drops_expired_letters_and_keeps_the_newest_within_the_count() -> None:
    j = Journaled()
    j.fail("old", at=NOW)
    j.fail("x", "y", "z", at=NOW + 2 * DAY)

    board = replayed(j.entries, NOW + 7 * DAY + 1, dead_letter_max=2)

    assert [k.task_id for k in board.dead_letters.letters()] == ["y", "z"]


def test_a_result_comes_back_for_its_tasks_own_ttl_before_any_registration() -> None:
    j = Journaled(result_ttl=3600.0)
    brief = TaskSignature(name="brief", result_ttl=60.0)
    j.board.register("w2", "w2", 10, [brief, TaskSignature(name="secret", result_ttl=0.0)], NOW)
    j.board.submit([TaskSpec(name=n, id=n) for n in ("brief", "secret")], Priority.NORMAL, NOW)
    j.board.dispatch(["w2"], NOW)
    outcomes = [Outcome(task_id=n, ok=True, result=1) for n in ("brief", "secret")]
    j.board.report("w2", [], outcomes, NOW)
    j.record()

    board = replayed(j.entries, NOW + 30, result_ttl=3600.0)

    assert board.get("brief", NOW + 30) is not None
    assert board.get("brief", NOW + 60) is None
    assert board.get("secret", NOW + 30) is None
    assert replayed(j.entries, NOW + 61, result_ttl=3600.0).get("brief", NOW + 61) is None


def test_dead_letter_entries_are_tagged_maps_with_field_names() -> None:
    letter = StoredDead(id="t", name="echo", priority=Priority.LOW, failed_at=NOW, args=[1])

    written = msgspec.msgpack.decode(
        msgspec.msgpack.encode([Dead(letter=letter), DeadGone(task_ids=["t"])])
    )

    assert written == [
        {
            "type": "dead",
            "letter": {"id": "t", "name": "echo", "priority": "low", "failed_at": NOW, "args": [1]},
        },
        {"type": "dead_gone", "task_ids": ["t"]},
    ]


def test_a_large_purge_is_written_in_several_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entries, "GONE_PER_ENTRY", 2)
    j = Journaled()
    j.fail("a", "b", "c", "d", "e")
    j.board.kept.add(dead_letter_ops.purge(j.board, FailedFilter(), True, NOW)[1])
    j.record()

    gone = [e.task_ids for e in j.entries if isinstance(e, DeadGone)]

    assert [len(ids) for ids in gone] == [2, 2, 1]
    assert len(replayed(j.entries, NOW + 1).dead_letters) == 0
