"""The follower's state machine and the leader's answers to it, without files or
sockets: fencing by epoch, gaps, checksums, snapshots staged then installed."""

from __future__ import annotations

from collections.abc import Sequence

from fastworker_control_plane.durability import frames
from fastworker_control_plane.replication import messages as m
from fastworker_control_plane.replication import sender
from fastworker_control_plane.replication.follower import (
    Follower,
    Install,
    Persist,
    Phase,
    Reply,
    Stage,
    Write,
)

LOG = b"L" * 16
OTHER = b"O" * 16
START = len(frames.MAGIC)


def framed(at: int, *payloads: bytes) -> bytes:
    data = b""
    for payload in payloads:
        data += frames.frame(payload, at + len(data))
    return data


def append(offset: int, data: bytes, *, epoch: int = 3, log: bytes = LOG) -> m.Append:
    return m.Append(epoch=epoch, log_id=log, offset=offset, data=data, size=offset + len(data))


def reply(instructions: Sequence[object]) -> m.Ack | m.Refused:
    last = instructions[-1]
    assert isinstance(last, Reply)
    return last.message


def test_an_append_that_fits_is_written_then_acknowledged_at_its_end() -> None:
    # Given a follower holding the leader's log up to START
    follower = Follower(epoch=3, log_id=LOG, durable=START)
    data = framed(START, b"one", b"two")
    # When the next frames arrive
    done = follower.receive(append(START, data))
    # Then they are written at its end, and the ack (the last instruction) covers them
    assert done[0] == Write(START, data)
    assert reply(done) == m.Ack(epoch=3, log_id=LOG, durable=START + len(data))
    assert follower.phase is Phase.IN_SYNC


def test_an_append_from_an_older_epoch_is_refused_and_writes_nothing() -> None:
    follower = Follower(epoch=5, log_id=LOG, durable=START)
    done = follower.receive(append(START, framed(START, b"x"), epoch=4))
    assert done == [Reply(m.Refused(epoch=5, reason=m.STALE_EPOCH))]
    assert follower.durable == START


def test_a_newer_epoch_is_persisted_before_anything_from_it_is_written() -> None:
    follower = Follower(epoch=3, log_id=LOG, durable=START)
    data = framed(START, b"x")
    done = follower.receive(append(START, data, epoch=4))
    assert done[:2] == [Persist(4, LOG), Write(START, data)]
    # And from then on the old leader is refused
    assert reply(follower.receive(append(START, b"", epoch=3))) == m.Refused(
        epoch=4, reason=m.STALE_EPOCH
    )


def test_an_append_past_the_followers_end_is_a_gap_answered_with_where_it_is() -> None:
    follower = Follower(epoch=3, log_id=LOG, durable=START)
    later = START + 100
    done = follower.receive(append(later, framed(later, b"x")))
    assert done == [Reply(m.Ack(epoch=3, log_id=LOG, durable=START, why=m.GAP))]
    # And the leader's answer to that is the tail from the follower's end
    log = sender.LogState(epoch=3, log_id=LOG, size=later + 50)
    assert sender.answer(reply(done), log) == sender.SendTail(START)


def test_a_frame_with_one_byte_changed_is_refused_by_its_checksum() -> None:
    follower = Follower(epoch=3, log_id=LOG, durable=START)
    data = bytearray(framed(START, b"payload"))
    data[-1] ^= 0x01
    done = follower.receive(append(START, bytes(data)))
    assert done == [Reply(m.Ack(epoch=3, log_id=LOG, durable=START, why=m.CHECKSUM))]
    assert follower.rejected == 1


def test_a_torn_frame_is_refused_whole_even_after_intact_ones() -> None:
    follower = Follower(epoch=3, log_id=LOG, durable=START)
    data = framed(START, b"intact", b"torn-at-the-end")
    done = follower.receive(append(START, data[:-3]))
    assert done == [Reply(m.Ack(epoch=3, log_id=LOG, durable=START, why=m.CHECKSUM))]


def test_a_frame_checksummed_for_another_offset_is_refused() -> None:
    # Given frames that are intact, but were written for a different place in the file
    follower = Follower(epoch=3, log_id=LOG, durable=START)
    done = follower.receive(append(START, framed(START + 8, b"elsewhere")))
    assert reply(done) == m.Ack(epoch=3, log_id=LOG, durable=START, why=m.CHECKSUM)


def test_an_append_of_another_log_asks_for_a_snapshot() -> None:
    follower = Follower(epoch=3, log_id=OTHER, durable=START + 10)
    done = follower.receive(append(START, framed(START, b"x")))
    assert reply(done) == m.Ack(epoch=3, log_id=OTHER, durable=START + 10, why=m.OTHER_LOG)
    log = sender.LogState(epoch=3, log_id=LOG, size=500)
    assert sender.answer(reply(done), log) == sender.SendSnapshot(0)


def test_a_snapshot_is_staged_then_installed_with_the_log_name_cleared_around_the_swap() -> None:
    # Given an empty follower, and a leader's log of three frames sent in two pieces
    follower = Follower()
    first = frames.MAGIC + framed(START, b"a", b"b")
    second = framed(len(first), b"c")
    size = len(first) + len(second)
    piece = m.Snapshot(epoch=2, log_id=LOG, offset=0, data=first, size=size)
    # When the first arrives, it is staged; the journal is untouched
    done = follower.receive(piece)
    assert Stage(0, first) in done
    assert reply(done) == m.Ack(epoch=2, log_id=b"", durable=0, staging=LOG, staged=len(first))
    assert follower.phase is Phase.CATCHING_UP
    # And the leader continues from what is staged
    log = sender.LogState(epoch=2, log_id=LOG, size=size)
    assert sender.answer(reply(done), log) == sender.SendSnapshot(len(first))
    # When the last arrives, it is installed between a cleared and a set log name
    done = follower.receive(
        m.Snapshot(epoch=2, log_id=LOG, offset=len(first), data=second, size=size)
    )
    assert done[:-1] == [
        Stage(len(first), second),
        Persist(2, b""),
        Install(LOG, size),
        Persist(2, LOG),
    ]
    assert reply(done) == m.Ack(epoch=2, log_id=LOG, durable=size)
    assert follower.phase is Phase.IN_SYNC  # type: ignore[comparison-overlap]  # narrowed above
    assert sender.answer(reply(done), log) == sender.Hold()


def test_a_snapshot_piece_out_of_order_is_a_gap() -> None:
    follower = Follower(epoch=2)
    follower.receive(m.Snapshot(epoch=2, log_id=LOG, offset=0, data=frames.MAGIC, size=99))
    done = follower.receive(m.Snapshot(epoch=2, log_id=LOG, offset=50, data=b"", size=99))
    assert reply(done) == m.Ack(
        epoch=2, log_id=b"", durable=0, staging=LOG, staged=START, why=m.GAP
    )


def test_a_message_in_another_stream_version_is_refused() -> None:
    follower = Follower(epoch=1)
    hello = m.Hello(v=m.STREAM_VERSION + 1, epoch=1, log_id=LOG, size=START)
    assert follower.receive(hello) == [Reply(m.Refused(epoch=1, reason=m.VERSION))]


def test_a_leader_told_of_a_newer_epoch_steps_down() -> None:
    log = sender.LogState(epoch=4, log_id=LOG, size=START)
    assert sender.answer(m.Refused(epoch=5, reason=m.STALE_EPOCH), log) == sender.StepDown(5)
    assert sender.answer(m.Ack(epoch=6, log_id=LOG, durable=START), log) == sender.StepDown(6)
    assert sender.answer(m.Refused(epoch=1, reason=m.VERSION), log) == sender.Incompatible()


def test_a_follower_past_the_end_of_the_leaders_log_gets_a_snapshot() -> None:
    # (only another file under the same name could explain it: never append to it)
    log = sender.LogState(epoch=4, log_id=LOG, size=100)
    assert sender.answer(m.Ack(epoch=4, log_id=LOG, durable=200), log) == sender.SendSnapshot(0)


def test_messages_round_trip_through_the_codec_tagged_by_op() -> None:
    sent: list[m.AnyMessage] = [
        m.Hello(epoch=1, log_id=LOG, size=9),
        append(START, b"", epoch=1),
        m.Snapshot(epoch=1, log_id=LOG, offset=0, data=b"x", size=1),
        m.Ack(epoch=1, log_id=LOG, durable=9, why=m.GAP),
        m.Refused(epoch=2, reason=m.STALE_EPOCH),
    ]
    assert [m.decode(m.encode(message)) for message in sent] == sent
    assert b"\xa2op\xa5hello" in m.encode(sent[0])
