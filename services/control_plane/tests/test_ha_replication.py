"""The leader's and follower's drivers over real NNG sockets and real files, in one
process: a leader's engine with its journal, a follower's link mirroring it. What an
acknowledgement waits for, when the leader goes on alone or refuses, fencing."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pynng
import pytest

from fastworker import Unauthorized
from fastworker_control_plane.core.board import TaskBoard
from fastworker_control_plane.core.rejected import Rejected
from fastworker_control_plane.durability.entries import snapshot
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.election import Term
from fastworker_control_plane.engine import Engine
from fastworker_control_plane.ha import addresses
from fastworker_control_plane.ha.follower import FollowerLink
from fastworker_control_plane.ha.leader import LeaderReplication, ReplicationSettings
from fastworker_control_plane.replication.tracker import Mode
from fastworker_control_plane.servers.responder import Responder
from fastworker_protocol import (
    Announce,
    Codec,
    Error,
    ErrorCode,
    Get,
    Param,
    Priority,
    TaskSignature,
    TaskSpec,
)

ADD = TaskSignature(name="add", params=[Param(name="x", kind="POSITIONAL_OR_KEYWORD")])
LAG_BOUND = 0.4  # short, so going alone is quick to see


@dataclass
class Leader:
    engine: Engine
    journal: Journal
    replication: LeaderReplication
    socket: pynng.Socket
    address: str
    leading: list[bool] = field(default_factory=lambda: [True])
    stepped_down: list[int] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


async def start_leader(
    directory: Path,
    auth_token: str | None = None,
    record_alone: Callable[[bool], Awaitable[bool]] | None = None,
    **settings: object,
) -> Leader:
    directory.mkdir()  # noqa: ASYNC240 (a test's own temporary directory)
    board = TaskBoard()
    engine = Engine(board, heartbeat_timeout=10)
    journal = Journal(directory)
    journal.load()
    writer = journal.start(lambda: snapshot(board, time.time()))
    engine.keep_journal(journal)
    leading = [True]
    stepped: list[int] = []
    replication = LeaderReplication(
        journal,
        7,
        lambda: leading[0],
        ReplicationSettings(lag_bound=LAG_BOUND, heartbeat=0.1, **settings),  # type: ignore[arg-type]
        on_step_down=stepped.append,
        record_alone=record_alone,
        auth_token=auth_token,
    )
    engine.replication = replication
    socket = pynng.Rep0(async_backend="asyncio")
    address = f"ipc://{directory}/replication.sock"
    socket.listen(address)
    leader = Leader(engine, journal, replication, socket, address)
    leader.leading, leader.stepped_down = leading, stepped
    loop = asyncio.get_running_loop()
    leader.tasks = [
        writer,
        loop.create_task(replication.serve(socket)),
        loop.create_task(replication.judge()),
    ]
    engine.board.register("w1", "host", 64, (ADD,), time.time())
    return leader


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[Leader]:
    leader = await start_leader(tmp_path / "leader")
    yield leader
    await stop_leader(leader)


async def stop_leader(leader: Leader) -> None:
    leader.engine.close()
    leader.socket.close()
    leader.replication.close()
    for task in leader.tasks[1:]:
        task.cancel()
    await asyncio.gather(*leader.tasks[1:], return_exceptions=True)
    await leader.journal.close()


@contextlib.asynccontextmanager
async def following(directory: Path, leader: Leader, epoch: int = 0) -> AsyncIterator[FollowerLink]:
    link = FollowerLink(directory, "b", max_message_size=1 << 20, silence=1.0)
    link.follower.epoch = max(link.follower.epoch, epoch)
    link.follow(leader.address)
    running = asyncio.get_running_loop().create_task(link.run())
    try:
        yield link
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        link.close()


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def submit(engine: Engine, *ids: str) -> None:
    engine.submit([TaskSpec(name="add", id=i, args=[1]) for i in ids], Priority.NORMAL)


async def test_an_acknowledgement_waits_until_the_follower_has_the_commit_on_disk(
    leader: Leader, tmp_path: Path
) -> None:
    async with following(tmp_path / "follower", leader) as link:
        await until(lambda: leader.replication.mode is Mode.REPLICATED)
        for round_ in range(20):
            submit(leader.engine, f"t{round_}")
            await leader.engine.outbox.durable()
            # Acknowledged: the follower has synced at least this far.
            assert link.follower.durable >= leader.replication.tracker._commits[-1].end
            assert f"t{round_}" in link._replica.recovered.live
    assert leader.replication.tracker.in_sync == ["b"]


async def test_without_a_follower_the_leader_goes_on_alone_after_the_lag_bound(
    leader: Leader, tmp_path: Path
) -> None:
    async with following(tmp_path / "follower", leader):
        await until(lambda: leader.replication.mode is Mode.REPLICATED)
    started = time.monotonic()
    submit(leader.engine, "after")
    await leader.engine.outbox.durable()
    waited = time.monotonic() - started
    assert leader.replication.mode is Mode.ALONE
    assert waited < LAG_BOUND * 3


class Coordinator:
    """Where a leader marks acknowledging alone: each call recorded, each answer held
    until ``answer`` (``None``: not yet)."""

    def __init__(self) -> None:
        self.calls: list[bool] = []
        self.answer: bool | None = None

    async def record_alone(self, alone: bool) -> bool:
        self.calls.append(alone)
        await until(lambda: self.answer is not None)
        assert self.answer is not None
        return self.answer


async def test_a_leader_marks_acknowledging_alone_before_it_does_and_clears_it_after(
    tmp_path: Path,
) -> None:
    # Given a replicated leader whose follower is gone, and a slow coordinator
    etcd = Coordinator()
    leader = await start_leader(tmp_path / "leader", record_alone=etcd.record_alone)
    try:
        async with following(tmp_path / "follower", leader):
            await until(lambda: leader.replication.mode is Mode.REPLICATED)
        submit(leader.engine, "after")
        acknowledged = asyncio.ensure_future(leader.engine.outbox.durable())
        # When the leader would go alone, it first asks to be marked so: meanwhile
        # nothing it alone has is acknowledged
        await until(lambda: etcd.calls == [True])
        await asyncio.wait([acknowledged], timeout=LAG_BOUND)
        assert not acknowledged.done()
        # Once the mark is recorded, the write is acknowledged alone
        etcd.answer = True
        await acknowledged
        assert leader.replication.mode is Mode.ALONE
        # And once the follower is back and has it all, the mark is cleared
        async with following(tmp_path / "follower", leader):
            await until(lambda: etcd.calls == [True, False])
            assert leader.replication.tracker.alone_permitted is False
    finally:
        etcd.answer = True
        await stop_leader(leader)


async def test_a_leader_the_coordinator_will_not_mark_acknowledges_nothing_alone(
    tmp_path: Path,
) -> None:
    # Given a leader whose term is over in the coordinator (the mark is refused)
    etcd = Coordinator()
    etcd.answer = False
    leader = await start_leader(tmp_path / "leader", record_alone=etcd.record_alone)
    try:
        submit(leader.engine, "alone")
        acknowledged = asyncio.ensure_future(leader.engine.outbox.durable())
        # Then the write, on its disk alone, is never acknowledged
        await until(lambda: len(etcd.calls) >= 2)
        assert not acknowledged.done()
        acknowledged.cancel()
    finally:
        await stop_leader(leader)


async def test_with_require_sync_a_leader_without_followers_refuses_writes(tmp_path: Path) -> None:
    leader = await start_leader(tmp_path / "leader", require_sync=True)
    try:
        with pytest.raises(Rejected) as refused:
            submit(leader.engine, "x")
        assert refused.value.code == ErrorCode.UNAVAILABLE
        async with following(tmp_path / "follower", leader):
            await until(lambda: leader.replication.accepts_writes())
            submit(leader.engine, "y")
            await leader.engine.outbox.durable()
    finally:
        await stop_leader(leader)


async def test_a_leader_that_no_longer_leads_acknowledges_nothing(leader: Leader) -> None:
    leader.leading[0] = False
    submit(leader.engine, "late")
    with pytest.raises(Rejected) as refused:
        await leader.engine.outbox.durable()
    assert refused.value.code == ErrorCode.UNAVAILABLE


async def test_a_follower_that_saw_a_newer_term_makes_the_leader_step_down(
    leader: Leader, tmp_path: Path
) -> None:
    async with following(tmp_path / "follower", leader, epoch=99):
        await until(lambda: leader.stepped_down == [99])


async def test_a_follower_behind_a_compaction_gets_a_snapshot_and_holds_the_same_bytes(
    tmp_path: Path,
) -> None:
    leader = await start_leader(tmp_path / "leader")
    try:
        for n in range(50):
            submit(leader.engine, f"before-{n}")
        await leader.engine.outbox.durable()
        leader.journal.rewrite(snapshot(leader.engine.board, time.time()))
        leader.journal.on_rewrite is not None and leader.journal.on_rewrite(leader.journal.size)
        async with following(tmp_path / "follower", leader) as link:
            await until(lambda: leader.replication.mode is Mode.REPLICATED)
            submit(leader.engine, "after")
            await leader.engine.outbox.durable()
            await until(lambda: link.follower.durable == leader.journal.size)
        mirror = (tmp_path / "follower" / "journal").read_bytes()
        assert mirror == (tmp_path / "leader" / "journal").read_bytes()
    finally:
        await stop_leader(leader)


async def test_a_follower_the_leader_refuses_stops_with_unauthorized_not_retrying(
    tmp_path: Path,
) -> None:
    # Given a leader with a token, and a follower with another
    leader = await start_leader(tmp_path / "leader", auth_token="the-token")
    link = FollowerLink(
        tmp_path / "follower", "b", max_message_size=1 << 20, silence=1.0, auth_token="other"
    )
    link.follow(leader.address)
    try:
        # When it follows, then its link ends with an error naming the setting to fix
        with pytest.raises(Unauthorized, match="set FASTWORKER_AUTH_TOKEN"):
            await asyncio.wait_for(link.run(), 5)
        assert link.follower.epoch == 0  # it took nothing from that leader
    finally:
        link.close()
        await stop_leader(leader)


def test_a_follower_announces_its_leaders_addresses_under_the_leaders_term() -> None:
    own = Announce(
        instance_id="",
        submit=[f"tcp://a:{p}" for p in range(5555, 5559)],
        results="tcp://a:5559",
        registration="tcp://a:5560",
    )
    term = Term("a-1234", 9, addresses.published(own, "tcp://a:5561"))
    said = addresses.announcement(term, "9.9")
    assert said == Announce(
        instance_id="a-1234.9",
        submit=own.submit,
        results=own.results,
        registration=own.registration,
        version="9.9",
        epoch=9,
    )
    assert addresses.replication_address(term) == "tcp://a:5561"
    assert addresses.announcement(Term("x", 1, ("nonsense",)), "1") is None


async def test_a_fenced_responder_answers_unavailable_before_and_after_handling() -> None:
    codec = Codec()
    fenced = [False]
    handled: list[object] = []

    async def handler(message: object, pipe: int) -> Error:
        handled.append(message)
        fenced[0] = True  # the term ends while the request is handled
        return Error(code=ErrorCode.INTERNAL, message="never sent")

    responder = Responder(
        "results", codec, handler, (Get,), fence=lambda: "not the leader" if fenced[0] else None
    )
    reply = codec.decode(await responder.reply_to(codec.encode(Get(task_ids=["x"])), 1))
    assert isinstance(reply, Error)
    assert reply.code == ErrorCode.UNAVAILABLE
    assert len(handled) == 1
    reply = codec.decode(await responder.reply_to(codec.encode(Get(task_ids=["x"])), 1))
    assert isinstance(reply, Error)
    assert reply.code == ErrorCode.UNAVAILABLE
    assert len(handled) == 1  # not handled at all once fenced
