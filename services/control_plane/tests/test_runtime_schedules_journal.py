"""Run-time schedules in the journal: their definitions and progress come back after a
restart and a compaction, a removed one stays removed, a replaced one comes back as
replaced. Pure: entries recorded from one board, replayed onto another."""

from __future__ import annotations

import msgspec
from recording_board import RecordingBoard

from fastworker_control_plane.core import runtime_schedules
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.board_view import BoardView
from fastworker_control_plane.durability.entries import Recorder, Recovered, snapshot
from fastworker_control_plane.durability.schema import (
    Entry,
    ScheduleDefined,
    ScheduleDropped,
    Tick,
    stored_schedule,
)
from fastworker_protocol import Param, Priority, ScheduleInfo, ScheduleSpec, TaskSignature

NOW = 1000.0
REPORT = TaskSignature(name="report", params=[Param(name="customer", kind="POSITIONAL_OR_KEYWORD")])
SPEC = ScheduleSpec(
    name="acme",
    task="report",
    args=["acme"],
    interval=60.0,
    priority=Priority.LOW,
    queue="reports",
)
TICK = TaskSignature(name="tick", repeat_interval=60.0)


class Journaled:
    """A board whose changes are recorded as the engine records them."""

    def __init__(self) -> None:
        self.board = RecordingBoard()
        self.board.learn_tasks([REPORT])
        self.recorder = Recorder(BoardView(self.board))
        self.entries: list[Entry] = []

    def record(self) -> list[Entry]:
        new = self.recorder.entries(self.board.take().changes)
        self.entries += new
        return new

    def replayed(self, now: float, entries: list[Entry] | None = None) -> TaskBoard:
        """A new board (no subworker registered yet) from the entries, through msgpack as
        the journal file holds them."""
        decoded = msgspec.msgpack.decode(
            msgspec.msgpack.encode(self.entries if entries is None else entries),
            type=list[Entry],
        )
        recovered = Recovered()
        for entry in decoded:
            recovered.apply(entry)
        board = TaskBoard()
        recovered.restore(board, now)
        return board


def runtime(board: TaskBoard) -> list[ScheduleInfo]:
    return [i for i in board.schedules.infos() if i.source == "runtime"]


def test_an_added_schedule_comes_back_with_its_definition_and_progress() -> None:
    j = Journaled()
    runtime_schedules.add(j.board, SPEC, NOW)
    j.record()
    j.board.release_due(NOW + 60)
    j.board.release_due(NOW + 120)  # skipped: the first run is still queued
    j.record()

    board = j.replayed(NOW + 130)

    [info] = runtime(board)
    assert (info.name, info.task, info.args, info.priority, info.queue) == (
        "acme",
        "report",
        ["acme"],
        Priority.LOW,
        "reports",
    )
    assert (info.times_run, info.skipped, info.next_run, info.running) == (1, 1, NOW + 180, True)
    assert board.schedules.defined == {"acme": SPEC}


def test_a_restored_schedule_keeps_ticking_with_new_run_ids() -> None:
    j = Journaled()
    runtime_schedules.add(j.board, SPEC, NOW)
    j.board.release_due(NOW + 60)
    j.record()
    board = j.replayed(NOW + 70)
    [first] = board.list_tasks(None, 10, NOW + 70)
    board.cancel(first.task_id, NOW + 70)  # the first run is over

    assert board.release_due(NOW + 120).queued == 1

    ids = sorted(r.task_id for r in board.list_tasks(None, 10, NOW + 120))
    assert ids == [f"acme@{NOW + 60:.3f}", f"acme@{NOW + 120:.3f}"]
    [info] = runtime(board)
    assert info.times_run == 2


def test_a_removed_schedule_stays_removed_after_a_restart() -> None:
    j = Journaled()
    runtime_schedules.add(j.board, SPEC, NOW)
    j.board.release_due(NOW + 60)
    j.record()
    runtime_schedules.remove(j.board, "acme")
    assert j.record() == [ScheduleDropped(name="acme")]

    board = j.replayed(NOW + 70)

    assert board.schedules.infos() == []
    assert board.release_due(NOW + 600).queued == 0


def test_a_replaced_schedule_comes_back_as_replaced_with_fresh_progress() -> None:
    j = Journaled()
    runtime_schedules.add(j.board, SPEC, NOW)
    j.board.release_due(NOW + 60)
    j.record()
    hourly = msgspec.structs.replace(SPEC, interval=3600.0, args=["bob"])
    runtime_schedules.add(j.board, hourly, NOW + 70)
    assert [type(e) for e in j.record()] == [ScheduleDefined, Tick]

    board = j.replayed(NOW + 80)

    [info] = runtime(board)
    assert (info.args, info.spec, info.times_run, info.next_run) == (
        ["bob"],
        "every 3600 s",
        0,
        NOW + 70 + 3600,
    )


def test_adding_the_same_schedule_again_writes_nothing() -> None:
    j = Journaled()
    runtime_schedules.add(j.board, SPEC, NOW)
    j.record()
    runtime_schedules.add(j.board, SPEC, NOW + 5)
    assert j.record() == []


def test_a_compacted_journal_holds_the_same_schedules() -> None:
    j = Journaled()
    j.board.learn_tasks([TICK])
    j.board.learn_schedules([TICK], NOW)
    runtime_schedules.add(j.board, SPEC, NOW)
    cron = ScheduleSpec(name="monday", task="report", args=["x"], cron="0 9 * * 1", tz="Asia/Tokyo")
    runtime_schedules.add(j.board, cron, NOW)
    j.board.release_due(NOW + 60)
    j.record()
    original = j.replayed(NOW + 61)
    original.learn_tasks([TICK])
    original.learn_schedules([TICK], NOW + 61)

    again = j.replayed(NOW + 61, snapshot(original, NOW + 61))
    again.learn_tasks([TICK])
    again.learn_schedules([TICK], NOW + 61)

    assert again.schedules.infos() == original.schedules.infos()
    assert again.schedules.defined == original.schedules.defined
    assert [i.name for i in again.schedules.infos()] == ["acme", "monday", "tick"]


def test_a_name_a_declaration_took_back_replays_as_the_declared_schedule() -> None:
    j = Journaled()
    runtime_schedules.add(j.board, SPEC, NOW)
    j.record()
    declared = TaskSignature(name="acme", repeat_interval=5.0)
    j.board.learn_tasks([declared])
    j.board.learn_schedules([declared], NOW + 1)
    j.board.release_due(NOW + 6)
    j.record()

    board = j.replayed(NOW + 7)

    assert runtime(board) == []
    board.learn_tasks([declared])
    board.learn_schedules([declared], NOW + 7)
    [info] = board.schedules.infos()
    assert (info.source, info.times_run, info.next_run) == ("declared", 1, NOW + 11)


def test_a_journal_of_only_older_entries_replays_without_run_time_schedules() -> None:
    j = Journaled()
    j.board.learn_tasks([TICK])
    j.board.learn_schedules([TICK], NOW)
    j.board.release_due(NOW + 60)
    j.record()
    assert {type(e).__name__ for e in j.entries} <= {"Put", "Tick"}

    board = j.replayed(NOW + 61)

    assert board.schedules.defined == {}
    assert list(board.schedules.saved) == ["tick"]


def test_schedule_entries_are_tagged_maps_with_field_names() -> None:
    defined = ScheduleDefined(schedule=stored_schedule(SPEC))
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(defined)) == {
        "type": "schedule",
        "schedule": {
            "name": "acme",
            "task": "report",
            "args": ["acme"],
            "interval": 60.0,
            "priority": "low",
            "queue": "reports",
        },
    }
    dropped = msgspec.msgpack.encode(ScheduleDropped(name="acme"))
    assert msgspec.msgpack.decode(dropped) == {"type": "unschedule", "name": "acme"}
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(defined), type=Entry) == defined


def test_a_schedule_whose_time_zone_is_gone_is_dropped_and_named() -> None:
    # A journal written where "Mars/Olympus_Mons" existed (as stored, it is only a name)
    lost = msgspec.structs.replace(SPEC, name="elsewhere", cron="0 8 * * *", interval=None)
    lost = msgspec.structs.replace(lost, tz="Mars/Olympus_Mons")
    recovered = Recovered()
    recovered.apply(ScheduleDefined(schedule=stored_schedule(SPEC)))
    recovered.apply(ScheduleDefined(schedule=stored_schedule(lost)))
    board = TaskBoard()

    recovered.restore(board, NOW)

    assert [i.name for i in runtime(board)] == ["acme"]
    assert recovered.dropped_schedules == ["elsewhere"]
