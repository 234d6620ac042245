"""A journal damaged before its end (a bad block, a stray write): refused untouched with
one line that says where, or salvaged on request, keeping every intact frame."""

from __future__ import annotations

from pathlib import Path

import pytest

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.journal import Journal, JournalError
from fastworker_control_plane.durability.schema import Entry, StoredPeriodic, Tick


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def tick(n: int) -> Tick:
    return Tick(periodic=StoredPeriodic(name=f"p{n}", spec="every 1 s", next_run=float(n)))


async def journal_of_three_writes(directory: Path) -> bytes:
    journal = Journal(directory)
    journal.load()
    journal.start(list)
    for n in (1, 2, 3):
        journal.append([tick(n)])
        await journal.flushed()
    await journal.close()
    return (directory / "journal").read_bytes()


def flip_in_second_frame(directory: Path, data: bytes) -> tuple[int, bytes]:
    second = frames.read(data).frames[1]
    damaged = bytearray(data)
    damaged[second.offset + frames.HEADER.size + 2] ^= 0x01
    (directory / "journal").write_bytes(bytes(damaged))
    return second.offset, bytes(damaged)


async def test_damage_before_the_end_is_refused_and_the_file_left_as_it_was(
    tmp_path: Path,
) -> None:
    # Given a journal with one flipped byte in its second of three writes
    offset, damaged = flip_in_second_frame(tmp_path, await journal_of_three_writes(tmp_path))
    after = len(damaged) - frames.read(damaged).frames[-1].offset
    # When it is loaded, then it is refused with one line saying where and what follows
    with pytest.raises(JournalError) as refused:
        Journal(tmp_path).load()
    message = str(refused.value)
    assert "\n" not in message
    assert f"damaged at byte {offset}" in message
    assert f"{after} bytes in 1 intact frames follow it" in message
    assert "--salvage-journal" in message
    # And nothing on disk changed
    assert (tmp_path / "journal").read_bytes() == damaged
    assert listing(tmp_path) == ["journal", "lock"]


async def test_salvage_keeps_the_frames_on_both_sides_and_sets_the_damaged_file_aside(
    tmp_path: Path,
) -> None:
    # Given the same damaged journal, started with salvage on
    _, damaged = flip_in_second_frame(tmp_path, await journal_of_three_writes(tmp_path))
    journal = Journal(tmp_path)
    replayed = journal.load(salvage=True)
    # Then the writes before and after the damage replay, and the skipped bytes are told
    assert sorted(replayed.recovered.periodics) == ["p1", "p3"]
    assert len(replayed.skipped) == 1
    # And once started, the journal holds no damage, and the damaged file is kept aside
    kept: list[Entry] = [Tick(periodic=p) for p in replayed.recovered.periodics.values()]
    journal.start(lambda: kept)
    await journal.close()
    [aside] = [tmp_path / n for n in listing(tmp_path) if n.startswith("journal.damaged-")]
    assert aside.read_bytes() == damaged
    again = Journal(tmp_path)
    assert sorted(again.load().recovered.periodics) == ["p1", "p3"]
    again.close_files()
