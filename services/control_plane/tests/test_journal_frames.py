"""The journal's frames: intact ones read back, a torn or corrupt tail is cut, never fatal."""

from __future__ import annotations

import pytest

from fastworker_control_plane.durability import frames

PAYLOADS = [b"first", b"second" * 10, b"third"]


def journal_bytes(payloads: list[bytes]) -> bytes:
    return frames.MAGIC + b"".join(frames.frame(p) for p in payloads)


def test_intact_frames_read_back_in_order() -> None:
    data = journal_bytes(PAYLOADS)
    reading = frames.read(data)
    assert reading.payloads == PAYLOADS
    assert (reading.good, reading.torn) == (len(data), 0)


def test_a_last_frame_torn_at_any_byte_is_dropped_and_the_rest_kept() -> None:
    whole = journal_bytes(PAYLOADS)
    intact = len(journal_bytes(PAYLOADS[:2]))
    for cut in range(intact, len(whole)):
        reading = frames.read(whole[:cut])
        assert reading.payloads == PAYLOADS[:2], cut
        assert (reading.good, reading.torn) == (intact, cut - intact)


def test_a_corrupt_frame_ends_the_journal_there() -> None:
    data = bytearray(journal_bytes(PAYLOADS))
    data[-2] ^= 0xFF  # a flipped bit in the last payload fails its checksum
    assert frames.read(bytes(data)).payloads == PAYLOADS[:2]


def test_an_empty_file_and_a_torn_header_are_a_new_journal() -> None:
    assert frames.read(b"").payloads == []
    reading = frames.read(frames.MAGIC[:3])
    assert (reading.payloads, reading.good, reading.torn) == ([], 0, 3)


def test_a_file_that_is_not_a_journal_is_refused_not_cut() -> None:
    with pytest.raises(frames.NotAJournal):
        frames.read(b"some other file's bytes")
