"""The journal file: group-committed appends, replay after a torn write, compaction, and
one control plane per state dir."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from fastworker_control_plane.core.periodic import PeriodicState
from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.entries import Entry, Tick
from fastworker_control_plane.durability.journal import Journal, JournalError


def tick(n: int) -> Entry:
    return Tick(PeriodicState(f"p{n}", "every 1 s", float(n), None, n, 0, None))


def opened(directory: Path, **options: int) -> Journal:
    journal = Journal(directory, **options)
    journal.load()
    journal.rewrite([])
    return journal


def replayed(directory: Path) -> tuple[list[str], int]:
    journal = Journal(directory)
    try:
        recovered, torn = journal.load()
    finally:
        journal.close_files()
    return sorted(recovered.periodics), torn


async def test_appends_are_on_disk_once_flushed_resolves(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    journal.start(list)
    journal.append([tick(1), tick(2)])
    await journal.flushed()
    # On disk already (read without the lock, which the open journal holds)
    assert len(frames.read((tmp_path / "journal").read_bytes()).payloads) == 1
    await journal.close()
    assert replayed(tmp_path) == (["p1", "p2"], 0)


async def test_many_appends_share_few_fsyncs(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    journal.start(list)
    waits = []
    for n in range(2000):
        journal.append([tick(n)])
        waits.append(journal.flushed())
    await asyncio.gather(*waits)
    commits = journal.commits
    await journal.close()
    assert commits < 100
    names, _ = replayed(tmp_path)
    assert len(names) == 2000


async def test_a_torn_last_write_is_dropped_and_the_rest_replayed(tmp_path: Path) -> None:
    # Given a journal whose last write was cut short by a power cut
    journal = opened(tmp_path)
    journal.start(list)
    journal.append([tick(1)])
    await journal.flushed()
    journal.append([tick(2)])
    await journal.close()
    path = tmp_path / "journal"
    os.truncate(path, path.stat().st_size - 3)
    # When it is replayed, then the intact part comes back and the torn bytes are counted
    names, torn = replayed(tmp_path)
    assert names == ["p1"]
    assert torn > 0
    # And once rewritten, the torn tail is gone for good
    again = Journal(tmp_path)
    again.rewrite(again.load()[0].periodics and [tick(1)])
    again.close_files()
    assert replayed(tmp_path) == (["p1"], 0)


async def test_a_full_journal_is_compacted_to_its_snapshot(tmp_path: Path) -> None:
    journal = opened(tmp_path, compact_bytes=4096)
    journal.start(lambda: [tick(0)])
    for n in range(500):
        journal.append([tick(n)])
        await journal.flushed()
    await journal.close()
    assert (tmp_path / "journal").stat().st_size < 8192
    names, _ = replayed(tmp_path)
    assert "p0" in names
    assert len(names) < 500


def test_a_second_control_plane_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    first = opened(tmp_path)
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


async def test_a_failed_write_fails_its_requests_and_is_retried_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a journal whose next fsync fails (a full disk, say)
    journal = opened(tmp_path)
    journal.start(list)
    real_sync = os.fdatasync
    failures = [OSError(28, "No space left on device")]

    def sync(fd: int) -> None:
        if failures:
            raise failures.pop()
        real_sync(fd)

    monkeypatch.setattr(os, "fdatasync", sync)
    # When entries are appended, their acknowledgement fails
    journal.append([tick(1)])
    with pytest.raises(JournalError, match="No space left on device"):
        await journal.flushed()
    # Then the next commit writes them after all, ahead of what came since
    journal.append([tick(2)])
    await journal.flushed()
    await journal.close()
    assert replayed(tmp_path) == (["p1", "p2"], 0)
