"""Replication with real files: a leader's journal, written by a real engine, shipped
message by message to a follower's state dir, replays there to the same state (and is
the same bytes); damage in transit is refused by the frames' checksums; a compaction
sends followers a snapshot; a restarted follower resumes where it synced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.durability.entries import Recovered, snapshot
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.replication import messages as m
from fastworker_control_plane.replication import sender
from fastworker_control_plane.replication.follower import Follower
from fastworker_control_plane.replication.replica import Replica
from fastworker_control_plane.replication.source import LeaderLog
from fastworker_protocol import Outcome, Param, Priority, TaskSignature, TaskSpec

NOW = 1000.0
ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])


@dataclass
class Leader:
    engine: Engine
    journal: Journal
    log: LeaderLog
    epoch: int = 1
    sent: list[str] = field(default_factory=list)  # ops of the messages sent

    def state(self) -> sender.LogState:
        self.log.follow()
        return sender.LogState(self.epoch, self.log.log_id, self.journal.size)

    async def settled(self) -> None:
        """Everything published is durable, and a compaction it started is done."""
        await self.engine.outbox.durable()
        await self.journal.flushed()


@dataclass
class Side:
    replica: Replica
    follower: Follower


def start_leader(directory: Path, compact_bytes: int = 1 << 30) -> Leader:
    board = TaskBoard()
    engine = Engine(board, heartbeat_timeout=10, clock=lambda: NOW)
    journal = Journal(directory, compact_bytes=compact_bytes)
    journal.load()
    journal.start(lambda: snapshot(board, NOW))
    engine.keep_journal(journal)
    return Leader(engine, journal, LeaderLog(directory / "journal"))


def open_side(directory: Path) -> Side:
    replica = Replica(directory)
    return Side(replica, replica.open())


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Leader]:
    leader = start_leader(tmp_path / "leader")
    yield leader
    await close(leader)


async def close(leader: Leader) -> None:
    leader.engine.close()
    await leader.journal.close()
    leader.log.close()


def pump(leader: Leader, side: Side, limit: int = 1 << 20) -> None:
    """Ship to the follower until it holds everything durable (the follower's every
    reply is what the leader answers next, as over a request/reply socket)."""
    state = leader.state()
    said = side.replica.carry_out(side.follower.receive(sender.hello(state)))
    for _ in range(10_000):
        assert said is not None
        decision = sender.answer(said, state)
        if isinstance(decision, sender.Hold):
            return
        assert isinstance(decision, sender.SendTail | sender.SendSnapshot), decision
        data = leader.log.read(decision.offset, state.size, limit)
        message = sender.message(decision, state, data)
        leader.sent.append(type(message).__name__)
        said = side.replica.carry_out(side.follower.receive(message))
    raise AssertionError("the follower never caught up")


async def work(leader: Leader, side: Side, rounds: int, limit: int = 1 << 20) -> None:
    """Submissions, deliveries, successes, failures and a cancel, shipped as they go."""
    engine = leader.engine
    engine.board.register("w1", "host", 64, (ADD,), NOW)
    for round_ in range(rounds):
        ids = [f"t{round_}-{n}" for n in range(20)]
        engine.submit(
            [TaskSpec(name="add", id=i, args=[n]) for n, i in enumerate(ids)], Priority.NORMAL
        )
        engine.cancel(ids[-1])
        await leader.settled()
        pump(leader, side, limit)
        delivery = await engine.fetch("w1", wait=0)
        outcomes = [
            Outcome(task_id=a.id, ok=n % 3 != 0, result=n)
            for n, a in enumerate(delivery.tasks[:12])
        ]
        engine.report("w1", [a.id for a in delivery.tasks], outcomes)
        await leader.settled()
        pump(leader, side, limit)


def replayed(directory: Path) -> Recovered:
    journal = Journal(directory)
    try:
        return journal.load().recovered
    finally:
        journal.close_files()


def same(a: Recovered, b: Recovered) -> None:
    assert a.live == b.live
    assert a.final == b.final
    assert a.periodics == b.periodics
    assert a.controls == b.controls


async def test_a_stream_of_appends_replays_on_the_follower_to_the_leaders_state(
    leader: Leader, tmp_path: Path
) -> None:
    # Given an empty follower, and a leader's engine taking work while it streams
    side = open_side(tmp_path / "follower")
    # When the leader's journal is shipped in small messages as it grows
    await work(leader, side, rounds=5, limit=300)
    # Then the follower started from a snapshot, then took appends
    assert leader.sent[0] == "Snapshot"
    assert leader.sent.count("Append") > 10
    # And its state as applied, and as replayed from its own file, is the leader's
    await close(leader)
    side.replica.close()
    mine = replayed(tmp_path / "follower")
    theirs = replayed(tmp_path / "leader")
    assert len(theirs.final) > 40
    assert len(theirs.live) > 20
    same(mine, theirs)
    same(side.replica.recovered, theirs)
    # And its journal is the leader's, byte for byte
    assert (tmp_path / "follower/journal").read_bytes() == (
        tmp_path / "leader/journal"
    ).read_bytes()


async def test_a_leader_compaction_sends_followers_a_snapshot_of_the_new_log(
    tmp_path: Path,
) -> None:
    # Given a leader that compacts as soon as its file grows
    leader = start_leader(tmp_path / "leader", compact_bytes=1)
    side = open_side(tmp_path / "follower")
    try:
        await work(leader, side, rounds=4, limit=500)
    finally:
        await close(leader)
        side.replica.close()
    # Then followers got a snapshot for each new log, and hold what the leader holds
    assert leader.sent.count("Snapshot") >= 3
    same(replayed(tmp_path / "follower"), replayed(tmp_path / "leader"))


async def test_a_frame_damaged_in_transit_is_refused_and_nothing_of_it_written(
    leader: Leader, tmp_path: Path
) -> None:
    side = open_side(tmp_path / "follower")
    await work(leader, side, rounds=1)
    before = side.follower.durable
    leader.engine.submit([TaskSpec(name="add", id="late", args=[1])], Priority.NORMAL)
    await leader.settled()
    state = leader.state()
    data = bytearray(leader.log.read(before, state.size))
    data[len(data) // 2] ^= 0xFF
    # When the damaged frames arrive
    damaged = m.Append(
        epoch=1, log_id=state.log_id, offset=before, data=bytes(data), size=state.size
    )
    said = side.replica.carry_out(side.follower.receive(damaged))
    # Then the follower refuses them by checksum and writes nothing
    assert said == m.Ack(epoch=1, log_id=state.log_id, durable=before, why=m.CHECKSUM)
    assert (tmp_path / "follower/journal").stat().st_size == before
    # And the leader's answer resends them, intact
    pump(leader, side)
    assert side.follower.durable == state.size
    assert "late" in side.replica.recovered.live


async def test_a_restarted_follower_resumes_from_what_it_synced_and_remembers_the_epoch(
    leader: Leader, tmp_path: Path
) -> None:
    # Given a follower that has caught up with a leader of epoch 7, then stops
    leader.epoch = 7
    side = open_side(tmp_path / "follower")
    await work(leader, side, rounds=1)
    durable = side.follower.durable
    side.replica.close()
    # When it starts again
    side = open_side(tmp_path / "follower")
    try:
        # Then it is where it was, on the same log, and takes only the tail
        assert (side.follower.durable, side.follower.epoch) == (durable, 7)
        assert side.follower.log_id == leader.log.log_id
        leader.sent.clear()
        leader.engine.submit([TaskSpec(name="add", id="after", args=[1])], Priority.NORMAL)
        await leader.settled()
        pump(leader, side)
        assert leader.sent == ["Append"]
        # And an old leader (epoch 6) is refused
        old = m.Append(epoch=6, log_id=leader.log.log_id, offset=0, data=b"", size=0)
        refused = side.replica.carry_out(side.follower.receive(old))
        assert refused == m.Refused(epoch=7, reason=m.STALE_EPOCH)
    finally:
        side.replica.close()


async def test_a_follower_whose_mirror_is_torn_cuts_the_tail_and_resends_it(
    leader: Leader, tmp_path: Path
) -> None:
    side = open_side(tmp_path / "follower")
    await work(leader, side, rounds=1)
    side.replica.close()
    path = tmp_path / "follower/journal"
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # a power cut in the last write
    side = open_side(tmp_path / "follower")
    try:
        assert side.follower.durable < len(data)
        pump(leader, side)
        assert path.read_bytes() == (tmp_path / "leader/journal").read_bytes()
    finally:
        side.replica.close()
