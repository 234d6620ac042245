"""Fuzzing the journal reader: whatever bytes the state dir holds (a torn write, a flipped
bit, another program's file), loading them either replays the intact frames or refuses
with a ``JournalError`` that says why, and never crashes or replays a damaged frame.
Without salvage what replays is always a prefix (damage before the end is refused); with
it, the intact frames on both sides of the damage, in order."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest

from fastworker_control_plane.durability import frames
from fastworker_control_plane.durability.journal import FILE_NAME, Journal, JournalError
from fastworker_control_plane.durability.schema import Entry, StoredPeriodic, Tick

CASES = 3_000
SEED = 20261202


def journal_of(batches: int) -> bytes:
    encoder = msgspec.msgpack.Encoder()
    data = frames.MAGIC
    for n in range(batches):
        periodic = StoredPeriodic(name=f"p{n}", spec="every 1 s", next_run=n, times_run=n)
        entries: list[Entry] = [Tick(periodic=periodic)]
        data += frames.frame(encoder.encode(entries), len(data))
    return data


def mutate(data: bytes, rng: random.Random) -> bytes:
    blob = bytearray(data)
    match rng.randrange(5):
        case 0:  # flip bits
            for _ in range(rng.randint(1, 4)):
                blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        case 1:  # cut anywhere
            del blob[rng.randrange(len(blob)) :]
        case 2:  # random garbage appended
            blob += rng.randbytes(rng.randint(1, 64))
        case 3:  # a chunk overwritten
            at = rng.randrange(len(blob))
            blob[at : at + 8] = rng.randbytes(8)
        case _:  # wholly random, magic kept or not
            blob = bytearray((frames.MAGIC if rng.random() < 0.5 else b"") + rng.randbytes(80))
    return bytes(blob)


@pytest.mark.parametrize("salvage", [False, True])
def test_no_bytes_in_the_state_dir_crash_the_control_plane(tmp_path: Path, salvage: bool) -> None:
    rng = random.Random(SEED)
    intact = journal_of(8)
    outcomes = {"replayed": 0, "refused": 0, "torn": 0, "skipped": 0}
    for case in range(CASES):
        data = mutate(intact, rng)
        (tmp_path / FILE_NAME).write_bytes(data)
        journal = Journal(tmp_path)
        try:
            replayed = journal.load(salvage=salvage)
        except JournalError:
            outcomes["refused"] += 1
            continue
        finally:
            journal.close_files()
        outcomes["replayed"] += 1
        outcomes["torn"] += replayed.torn > 0
        outcomes["skipped"] += bool(replayed.skipped)
        # Only whole, intact frames were replayed, in order (with nothing skipped: a prefix)
        numbers = [int(p.times_run) for p in replayed.recovered.periodics.values()]
        assert numbers == sorted(numbers), (case, data.hex())
        assert set(numbers) <= set(range(8)), (case, data.hex())
        if not replayed.skipped:
            assert numbers == list(range(len(numbers))), (case, data.hex())
    print(f"{CASES} damaged journals (salvage {salvage}): {outcomes}")
    assert outcomes["replayed"] > 0
    assert outcomes["refused"] > 0
    assert (outcomes["skipped"] > 0) == salvage


THREE = journal_of(3)
LAST_FRAME = len(THREE) - len(journal_of(2))


@pytest.mark.parametrize("cut", range(1, LAST_FRAME))
def test_a_last_write_torn_anywhere_replays_what_came_before(tmp_path: Path, cut: int) -> None:
    (tmp_path / FILE_NAME).write_bytes(THREE[:-cut])
    journal = Journal(tmp_path)
    replayed = journal.load()
    journal.close_files()
    assert sorted(replayed.recovered.periodics) == ["p0", "p1"]
    assert replayed.torn == LAST_FRAME - cut
