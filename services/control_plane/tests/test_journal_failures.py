"""When the journal cannot write: a failed write fails its acknowledgements and is retried
on its own (``problem`` says why until then); a writer that dies fails every wait, now and
later, instead of leaving them hanging."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fastworker_control_plane.durability import journal as journal_module
from fastworker_control_plane.durability.journal import Journal, JournalError
from fastworker_control_plane.durability.schema import StoredPeriodic, Tick

DEADLINE = 5.0


def tick(n: int) -> Tick:
    return Tick(periodic=StoredPeriodic(name=f"p{n}", spec="every 1 s", next_run=float(n)))


def opened(directory: Path) -> Journal:
    journal = Journal(directory)
    journal.load()
    journal.start(list)
    return journal


def replayed_names(directory: Path) -> list[str]:
    journal = Journal(directory)
    try:
        return sorted(journal.load().recovered.periodics)
    finally:
        journal.close_files()


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_a_failed_write_fails_its_requests_and_is_retried_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a journal whose fsyncs fail (a full disk, say)
    monkeypatch.setattr(journal_module, "RETRY_INTERVAL", 0.05)
    journal = opened(tmp_path)
    real_sync = os.fdatasync
    full = True

    def sync(fd: int) -> None:
        if full:
            raise OSError(28, "No space left on device")
        real_sync(fd)

    monkeypatch.setattr(os, "fdatasync", sync)
    # When entries are appended, their acknowledgement fails and the journal says why
    journal.append([tick(1)])
    with pytest.raises(JournalError, match="No space left on device"):
        await journal.flushed()
    assert journal.problem is not None
    assert "No space left on device" in journal.problem
    # Then once the disk has room again, the writer writes them without being asked
    full = False
    await until(lambda: journal.problem is None, "the retried write")
    journal.append([tick(2)])
    await journal.flushed()
    await journal.close()
    assert replayed_names(tmp_path) == ["p1", "p2"]


async def test_a_writer_that_dies_fails_every_wait_now_and_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a journal whose writer dies of something that is not an OSError
    journal = opened(tmp_path)

    def broken(payloads: list[bytes]) -> None:
        raise RuntimeError("a bug in the writer")

    monkeypatch.setattr(journal, "_write", broken)
    writer = journal._writer
    assert writer is not None
    journal.append([tick(1)])
    waiting = journal.flushed()
    with pytest.raises(RuntimeError, match="a bug"):
        await asyncio.wait_for(asyncio.shield(writer), DEADLINE)
    # When its supervisor is told (as the control plane's is)
    journal.fail(writer.exception() or RuntimeError())
    # Then the waiting acknowledgement fails, and so does every later one, at once
    with pytest.raises(JournalError, match=r"writer stopped.*a bug in the writer"):
        await asyncio.wait_for(waiting, DEADLINE)
    with pytest.raises(JournalError, match="writer stopped"):
        await asyncio.wait_for(journal.flushed(), DEADLINE)
    assert journal.problem is not None
    await journal.close()


async def test_a_request_answered_after_close_fails_instead_of_waiting_forever(
    tmp_path: Path,
) -> None:
    journal = opened(tmp_path)
    await journal.close()
    with pytest.raises(JournalError, match="closed"):
        await asyncio.wait_for(journal.flushed(), DEADLINE)


async def test_a_system_without_fdatasync_syncs_each_write_with_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a system with no fdatasync (macOS)
    monkeypatch.delattr(os, "fdatasync")
    real_fsync = os.fsync
    synced: list[int] = []

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    # When entries are appended and acknowledged
    journal = opened(tmp_path)
    journal.append([tick(1)])
    await journal.flushed()
    await journal.close()

    # Then the write was synced with fsync, and it is there on replay
    assert synced
    assert replayed_names(tmp_path) == ["p1"]
