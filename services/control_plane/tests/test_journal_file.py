"""The journal file: group-committed appends, replay after a torn write, compaction by the
writer, one control plane per state dir, and entries that cannot be encoded."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.journal import Journal, JournalError
from fastworker_control_plane.durability.replay import Replayed
from fastworker_control_plane.durability.schema import (
    Entry,
    Put,
    StoredPeriodic,
    StoredTask,
    Tick,
)
from fastworker_protocol import Priority, TaskState


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def tick(n: int) -> Entry:
    return Tick(periodic=StoredPeriodic(name=f"p{n}", spec="every 1 s", next_run=float(n)))


def put(task_id: str, *args: object) -> Entry:
    task = StoredTask(id=task_id, name="echo", priority=Priority.NORMAL, state=TaskState.QUEUED)
    task.args = list(args)
    return Put(task=task)


def opened(directory: Path, snapshot: Callable[[], list[Entry]] = list, **options: int) -> Journal:
    """A started journal (the caller closes it)."""
    journal = Journal(directory, **options)
    journal.load()
    journal.start(snapshot)
    return journal


def replayed(directory: Path) -> Replayed:
    journal = Journal(directory)
    try:
        return journal.load()
    finally:
        journal.close_files()


def names(directory: Path) -> list[str]:
    state = replayed(directory).recovered
    return sorted([*state.periodics, *state.live])


async def test_appends_are_on_disk_once_flushed_resolves(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    journal.append([tick(1), tick(2)])
    await journal.flushed()
    # On disk already (read without the lock, which the open journal holds)
    assert len(frames.read((tmp_path / "journal").read_bytes()).frames) == 1
    await journal.close()
    assert (names(tmp_path), replayed(tmp_path).torn) == (["p1", "p2"], 0)


async def test_many_appends_share_few_fsyncs(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    waits = []
    for n in range(2000):
        journal.append([tick(n)])
        waits.append(journal.flushed())
    await asyncio.gather(*waits)
    commits = journal.commits
    await journal.close()
    assert commits < 100
    assert len(names(tmp_path)) == 2000


async def test_a_torn_last_write_is_dropped_and_the_rest_replayed(tmp_path: Path) -> None:
    # Given a journal whose last write was cut short by a power cut
    journal = opened(tmp_path)
    journal.append([tick(1)])
    await journal.flushed()
    journal.append([tick(2)])
    await journal.close()
    path = tmp_path / "journal"
    os.truncate(path, path.stat().st_size - 3)
    # When it is replayed, then the intact part comes back and the torn bytes are counted
    assert names(tmp_path) == ["p1"]
    assert replayed(tmp_path).torn > 0
    # And once started again, the torn tail is cut and what follows is appended intact
    good = replayed(tmp_path).good
    again = opened(tmp_path, lambda: [tick(1)])  # (its snapshot: what the replay gave)
    assert path.stat().st_size == good  # cut in place, before the writer ever ran
    again.append([tick(3)])
    await again.flushed()
    await again.close()
    assert (names(tmp_path), replayed(tmp_path).torn) == (["p1", "p3"], 0)


async def test_start_appends_to_the_journal_in_place_and_the_writer_compacts_it_later(
    tmp_path: Path,
) -> None:
    # Given a journal of many writes
    journal = opened(tmp_path)
    for n in range(50):
        journal.append([tick(n)])
        await journal.flushed()
    await journal.close()
    path = tmp_path / "journal"
    before = path.stat()
    # When it is started again, then start itself rewrites nothing: no space is needed
    compacted = asyncio.Event()

    def snapshot() -> list[Entry]:
        compacted.set()
        return [tick(0)]

    again = opened(tmp_path, snapshot)
    assert (path.stat().st_ino, path.stat().st_size) == (before.st_ino, before.st_size)
    # And the writer compacts it soon after, to its snapshot
    await asyncio.wait_for(compacted.wait(), 5)
    await again.close()
    assert path.stat().st_size < before.st_size
    assert names(tmp_path) == ["p0"]


async def test_a_full_journal_is_compacted_to_its_snapshot(tmp_path: Path) -> None:
    journal = opened(tmp_path, lambda: [tick(0)], compact_bytes=4096)
    for n in range(500):
        journal.append([tick(n)])
        await journal.flushed()
    await journal.close()
    assert (tmp_path / "journal").stat().st_size < 8192
    assert "p0" in names(tmp_path)
    assert len(names(tmp_path)) < 500


async def test_a_compaction_that_fails_leaves_no_temporary_file_and_appending_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a journal whose compaction fails once its temporary file is half written
    journal = opened(tmp_path, compact_bytes=512)
    real_fsync = os.fsync

    def full(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full)
    # When it grows past its bound
    for n in range(40):
        journal.append([tick(n)])
        await journal.flushed()
    await journal.close()
    # Then no temporary file is left, and every write is in the journal
    assert listing(tmp_path) == ["journal", "lock"]
    assert len(names(tmp_path)) == 40


def test_a_second_control_plane_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    first = Journal(tmp_path)
    first.load()
    try:
        with pytest.raises(JournalError, match="in use by another control plane"):
            Journal(tmp_path).load()
    finally:
        first.close_files()
    Journal(tmp_path).load()  # free again once the first has closed


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    (tmp_path / "journal").write_bytes(b"not a journal at all")
    with pytest.raises(JournalError, match="bad magic"):
        Journal(tmp_path).load()
    assert (tmp_path / "journal").read_bytes() == b"not a journal at all"


def test_a_state_dir_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(JournalError, match="cannot use"):
        Journal(blocker / "state").load()


async def test_an_entry_that_cannot_be_encoded_fails_alone(tmp_path: Path) -> None:
    # Given a batch in which one task's argument cannot be encoded (nested too deeply for
    # the encoder, or of a type it does not know)
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    journal = opened(tmp_path)
    batch = [put("a", 1), put("deep", deep), put("odd", object()), put("b", 2), tick(1)]
    # When it is appended, then nothing raises, and every other entry is written
    journal.append(batch)
    await journal.flushed()
    await journal.close()
    assert names(tmp_path) == ["a", "b", "p1"]
