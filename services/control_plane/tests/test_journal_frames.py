"""The journal's frames: intact ones read back; a torn last write is cut; damage followed
by intact frames is reported (never mistaken for a torn tail); other versions refused."""

from __future__ import annotations

import pytest

from fastworker_control_plane.durability import frames

PAYLOADS = [b"first", b"second" * 10, b"third"]


def journal_bytes(payloads: list[bytes]) -> bytes:
    data = frames.MAGIC
    for payload in payloads:
        data += frames.frame(payload, len(data))
    return data


def offsets(payloads: list[bytes]) -> list[int]:
    return [f.offset for f in frames.read(journal_bytes(payloads)).frames]


def test_intact_frames_read_back_in_order() -> None:
    data = journal_bytes(PAYLOADS)
    reading = frames.read(data)
    assert reading.payloads == PAYLOADS
    assert (reading.good, reading.torn, reading.gaps) == (len(data), 0, [])


def test_a_last_frame_torn_at_any_byte_is_dropped_and_the_rest_kept() -> None:
    whole = journal_bytes(PAYLOADS)
    intact = len(journal_bytes(PAYLOADS[:2]))
    for cut in range(intact, len(whole)):
        reading = frames.read(whole[:cut])
        assert reading.payloads == PAYLOADS[:2], cut
        assert (reading.good, reading.torn, reading.gaps) == (intact, cut - intact, []), cut


def test_a_corrupt_last_frame_is_a_torn_tail() -> None:
    data = bytearray(journal_bytes(PAYLOADS))
    data[-2] ^= 0xFF  # a flipped bit in the last payload fails its checksum
    reading = frames.read(bytes(data))
    assert reading.payloads == PAYLOADS[:2]
    assert reading.gaps == []
    assert reading.torn == frames.HEADER.size + len(PAYLOADS[2])


@pytest.mark.parametrize("where", ["sync", "length", "crc", "payload"])
def test_damage_followed_by_intact_frames_is_a_gap_not_a_torn_tail(where: str) -> None:
    # Given one flipped byte in the first frame, in each part of it
    data = bytearray(journal_bytes(PAYLOADS))
    first = offsets(PAYLOADS)[0]
    data[first + {"sync": 1, "length": 4, "crc": 9, "payload": 13}[where]] ^= 0x01
    # When it is read
    reading = frames.read(bytes(data))
    # Then the damage is reported where it is, and every later frame is still read
    assert reading.gaps == [frames.Gap(first, frames.HEADER.size + len(PAYLOADS[0]))]
    assert reading.payloads == PAYLOADS[1:]
    assert reading.torn == 0
    assert reading.frames_after(reading.gaps[0]) == 2


def test_a_frame_hidden_inside_a_payload_is_not_taken_for_a_frame() -> None:
    # Given a payload carrying the bytes of a whole, valid frame for another offset (an
    # argument could), as the last write, torn before its end
    fake = frames.frame(b"injected", 200)
    data = journal_bytes([b"first", b"x" * 184 + fake + b"tail"])
    torn = data[:-3]
    # Then the torn write is a torn tail, and the fake frame is not replayed
    reading = frames.read(torn)
    assert reading.payloads == [b"first"]
    assert reading.gaps == []


def test_an_empty_file_and_a_torn_header_are_a_new_journal() -> None:
    assert frames.read(b"").payloads == []
    reading = frames.read(frames.MAGIC[:3])
    assert (reading.payloads, reading.good, reading.torn) == ([], 0, 3)


def test_a_file_that_is_not_a_journal_is_refused_not_cut() -> None:
    with pytest.raises(frames.NotAJournal):
        frames.read(b"some other file's bytes")


@pytest.mark.parametrize(
    ("magic", "says"),
    [(b"FWJRNL01", "format 1, written by an older"), (b"FWJRNL03", "format 3, written by a newer")],
)
def test_a_journal_of_another_format_version_is_refused_saying_what_to_do(
    magic: bytes, says: str
) -> None:
    with pytest.raises(frames.WrongVersion, match=says) as refused:
        frames.read(magic + b"\x00" * 20)
    assert "move the state dir away" in str(refused.value)
    assert f"reads format {frames.VERSION} only" in str(refused.value)
