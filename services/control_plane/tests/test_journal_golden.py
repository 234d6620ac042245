"""The journal's on-disk format is a contract with every journal already written: the
checked-in golden journal (written by data/journal/golden.py) must decode to the same
tasks, and the same entries must encode to the same bytes, in every later version."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

from fastworker_control_plane.core.records import TaskRecord
from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.durability.schema import (
    Done,
    Entry,
    Put,
    Step,
    StoredTask,
    Tick,
    periodic_state,
    stored_task,
    task_record,
)
from fastworker_protocol import TaskState

DATA = Path(__file__).parent / "data" / "journal"
IN_MEMORY_ONLY = {"line", "final"}  # links to statistics and the reply: never written


@pytest.fixture(scope="module")
def golden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("journal_golden", DATA / "golden.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def decoded(path: Path) -> list[list[Entry]]:
    decoder = msgspec.msgpack.Decoder(list[Entry])
    reading = frames.read(path.read_bytes())
    assert (reading.gaps, reading.torn) == ([], 0)
    return [decoder.decode(payload) for payload in reading.payloads]


def test_the_golden_journal_decodes_to_the_tasks_it_was_written_from(golden: ModuleType) -> None:
    [puts, steps, dones, ticks] = decoded(golden.FILE)

    assert [task_record(e.task) for e in puts if isinstance(e, Put)] == [
        golden.EVERY_FIELD,
        golden.MINIMAL,
    ]
    assert steps == golden.STEPS
    assert [task_record(e.task) for e in dones if isinstance(e, Done)] == [
        golden.SUCCEEDED,
        golden.FAILURE,
    ]
    assert [periodic_state(e.periodic) for e in ticks if isinstance(e, Tick)] == [golden.PERIODIC]


async def test_the_same_entries_encode_to_the_same_bytes(
    golden: ModuleType, tmp_path: Path
) -> None:
    assert await golden.write(tmp_path) == golden.FILE.read_bytes()


def test_the_golden_journal_replays_to_its_final_state(golden: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "journal").write_bytes(golden.FILE.read_bytes())
    journal = Journal(tmp_path)
    replayed = journal.load()
    journal.close_files()

    state = replayed.recovered
    assert sorted(state.live) == ["t-every-field", "t-minimal"]
    assert state.live["t-minimal"].state == TaskState.RUNNING
    assert sorted(state.final) == ["t-failed", "t-succeeded"]
    assert list(state.periodics) == ["tick"]


def test_every_field_of_a_task_is_written_or_deliberately_not() -> None:
    # A new TaskRecord field must be added to the schema (or to IN_MEMORY_ONLY) on purpose
    record_fields = set(TaskRecord.__struct_fields__) - IN_MEMORY_ONLY
    assert record_fields == set(StoredTask.__struct_fields__), (
        "TaskRecord and the journal's StoredTask differ: add the field to "
        "durability/schema.py (as a new field with a default, so old journals still read)"
    )


def test_a_task_survives_the_round_trip_through_the_schema(golden: ModuleType) -> None:
    for record in (golden.EVERY_FIELD, golden.MINIMAL, golden.SUCCEEDED, golden.FAILURE):
        written = msgspec.msgpack.encode(stored_task(record))
        assert task_record(msgspec.msgpack.decode(written, type=StoredTask)) == record


def test_entries_are_maps_with_field_names_so_fields_can_be_added() -> None:
    written = msgspec.msgpack.encode(Step(task_id="t", state=TaskState.RUNNING, attempts=1))
    assert msgspec.msgpack.decode(written) == {
        "type": "step",
        "task_id": "t",
        "state": "running",
        "attempts": 1,
    }
    # A field from a later version is ignored; one this version added reads its default
    later = msgspec.msgpack.encode({"type": "step", "task_id": "t", "state": "running", "new": 1})
    assert msgspec.msgpack.decode(later, type=Entry) == Step(task_id="t", state=TaskState.RUNNING)


@pytest.mark.parametrize(("version", "says"), [(1, "older"), (3, "newer")])
def test_a_journal_of_another_version_is_refused_saying_what_to_do(
    tmp_path: Path, version: int, says: str
) -> None:
    from fastworker_control_plane.durability.journal import JournalError

    (tmp_path / "journal").write_bytes(b"FWJRNL%02d" % version + b"\x00" * 40)
    with pytest.raises(JournalError, match=f"format {version}, written by an? {says}"):
        Journal(tmp_path).load()
