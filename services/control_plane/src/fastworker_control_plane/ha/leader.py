"""The leader's side of replication: ship the journal to followers, release
acknowledgements once enough of them have it.

Followers dial the leader's replication socket (REP) and each sends an ``Ack`` saying
where it is; the leader answers with what it lacks (``sender.answer``), or holds the
request until the next commit (or a heartbeat interval), so a follower in sync learns of
each group commit at once and its next ``Ack`` is the acknowledgement of it. A handful of
NNG contexts answer followers side by side.

``Gate`` is what ``Engine.persisted`` waits on with replication: a group commit is
acknowledged to clients once the leader's fsync and ``sync_replicas`` in-sync followers'
cover it (``Tracker.releasable``), and only while this process still leads (the fence,
checked before each release). It is re-judged on every follower ``Ack``, every commit and
a timer (``lag_bound / 4``), so a follower that dies holds acknowledgements back for at
most ``lag_bound`` before the leader goes on alone (or, with ``require_sync``, refuses).

Before it acknowledges anything alone, a replicated leader marks that in the coordinator
(``record_alone``), in a transaction on its own term, and clears the mark once every
follower has all it acknowledged alone: while marked, no follower may depose it early
(``Elector.depose``), so a follower that takes over early never lacks an acknowledged write.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
import pynng
import structlog
from prometheus_client.registry import Collector

from fastworker_common.tokens import Tokens
from fastworker_control_plane.durability.errors import NotLeading
from fastworker_control_plane.durability.journal import Journal
from fastworker_control_plane.replication import messages as m
from fastworker_control_plane.replication import sender
from fastworker_control_plane.replication.source import LeaderLog
from fastworker_control_plane.replication.tracker import LAG_BOUND, Lag, Mode, Tracker

log = structlog.get_logger(__name__)

CONTEXTS = 8  # followers answered side by side (3 replicas need 2)
HEARTBEAT = 0.5  # seconds a follower's request is held with nothing new
FORGET_AFTER = 300.0  # seconds of silence before a follower leaves metrics and the dashboard


@dataclass(frozen=True)
class ReplicationSettings:
    sync_replicas: int = 1
    require_sync: bool = False
    lag_bound: float = LAG_BOUND
    heartbeat: float = HEARTBEAT


@dataclass(frozen=True)
class Leadership:
    """What a control plane needs to lead replicas: its term, how to check it still
    leads (the fence), what to do when a follower has seen a newer term, and the
    replica's own metrics and readiness details."""

    candidate_id: str
    epoch: int
    leading: Callable[[], bool]
    settings: ReplicationSettings
    on_step_down: Callable[[int], None]
    # mark (True) or clear (False) acknowledging alone in the coordinator; False: not leading
    record_alone: Callable[[bool], Awaitable[bool]] | None = None
    collectors: tuple[Collector, ...] = ()
    details: Callable[[], dict[str, object]] | None = None


@dataclass(frozen=True)
class FollowerStatus:
    name: str
    in_sync: bool
    lag: Lag
    durable: int


class LeaderReplication:
    def __init__(
        self,
        journal: Journal,
        epoch: int,
        leading: Callable[[], bool],
        settings: ReplicationSettings,
        *,
        on_step_down: Callable[[int], None],
        record_alone: Callable[[bool], Awaitable[bool]] | None = None,
        auth_token: str | Tokens | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.epoch = epoch
        self._auth = Tokens.of(auth_token)
        self.settings = settings
        self._journal = journal
        self._leading = leading
        self._on_step_down = on_step_down
        self._clock = clock
        self._log = LeaderLog(journal.path)
        self._log.follow()
        self._durable = journal.size
        self.tracker = Tracker(
            self._log.log_id,
            journal.size,
            clock(),
            sync_replicas=settings.sync_replicas,
            lag_bound=settings.lag_bound,
            require_sync=settings.require_sync,
            alone_permitted=record_alone is None,
        )
        self._record_alone = record_alone
        self._marking: asyncio.Task[None] | None = None
        self._marked = False  # the coordinator may hold the mark (until a delete succeeds)
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._grew = asyncio.Event()
        self._mode = self.tracker.mode(clock())
        journal.on_commit = self._committed
        journal.on_rewrite = self._rewritten

    # --- the gate ------------------------------------------------------------------------

    def after(self, flushed: asyncio.Future[None]) -> asyncio.Future[None]:
        """Resolves once ``flushed`` has and its commit may be acknowledged (replicated,
        or alone when allowed); raises ``NotLeading`` if this process stops leading."""
        released: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_flushed(done: asyncio.Future[None]) -> None:
            if released.done():
                return
            if done.cancelled():
                released.cancel()
            elif (error := done.exception()) is not None:
                released.set_exception(error)
            else:
                # Its commit has been counted: ``on_commit`` runs before the waiters.
                self._waiting.append((self.tracker.seq, released))
                self.release()

        flushed.add_done_callback(on_flushed)
        return released

    def accepts_writes(self) -> bool:
        return self.tracker.accepts_writes(self._clock())

    def release(self) -> None:
        """Resolve every wait its commit allows (or fail them all if not leading)."""
        if not self._leading():
            self.fail(NotLeading("this control plane is no longer the leader"))
            return
        now = self._clock()
        line = self.tracker.releasable(now)
        mode = self.tracker.mode(now)
        if mode is not self._mode:
            self._mode = mode
            _log_mode(mode, self.tracker.in_sync, self.settings.sync_replicas)
        if self._record_alone is not None and self._marking is None:
            if mode is Mode.ALONE and not self.tracker.alone_permitted:
                self._marking = asyncio.get_running_loop().create_task(self._mark(True))
            elif self._marked and self.tracker.alone_covered(now):
                self.tracker.alone_permitted = False  # before the mark goes, not after
                self._marking = asyncio.get_running_loop().create_task(self._mark(False))
        while self._waiting and self._waiting[0][0] <= line:
            _, waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)

    async def _mark(self, alone: bool) -> None:
        """Mark (or clear) acknowledging alone; once marked, release what it allows."""
        assert self._record_alone is not None
        self._marked = self._marked or alone
        try:
            recorded = await self._record_alone(alone)
        except Exception as exc:  # the coordinator is unreachable: the next release retries
            log.warning("replication: cannot mark acknowledging alone", alone=alone, error=str(exc))
            recorded = False
        finally:
            self._marking = None
        if recorded:
            self.tracker.alone_permitted = alone
            self._marked = alone
        if self._waiting or alone:
            self.release()

    def fail(self, error: BaseException) -> None:
        waiting, self._waiting = self._waiting, deque()
        for _, waiter in waiting:
            if not waiter.done():
                waiter.set_exception(error)

    @property
    def mode(self) -> Mode:
        return self._mode

    def followers(self) -> list[FollowerStatus]:
        now = self._clock()
        return [
            FollowerStatus(view.name, view.in_sync, self.tracker.lag(view.name, now), view.durable)
            for view in self.tracker.followers.values()
        ]

    # --- the journal's hooks -----------------------------------------------------------

    def _committed(self, size: int, frames: int) -> None:
        self._durable = size
        self.tracker.committed(size, self._clock(), frames)
        self._wake()
        self.release()

    def _rewritten(self, size: int) -> None:
        self._durable = size
        self._log.follow()
        self.tracker.rewritten(self._log.log_id, size, self._clock())
        self._wake()

    def _wake(self) -> None:
        self._grew.set()
        self._grew = asyncio.Event()

    # --- serving followers ---------------------------------------------------------------

    async def judge(self) -> None:
        """Re-judge the in-sync set now and then (a silent follower drops out), and
        forget a follower silent for ``FORGET_AFTER`` (a replica removed for good)."""
        while True:
            await asyncio.sleep(self.settings.lag_bound / 4)
            now = self._clock()
            for view in list(self.tracker.followers.values()):
                if now - view.heard > FORGET_AFTER:
                    self.tracker.forget(view.name)
            self.release()

    async def serve(self, socket: pynng.Socket) -> None:
        """Answer followers on ``socket`` until it closes."""
        await asyncio.gather(*(self._answer_loop(socket) for _ in range(CONTEXTS)))

    async def _answer_loop(self, socket: pynng.Socket) -> None:
        context = socket.new_context()
        try:
            while True:
                try:
                    data = await context.arecv()
                except pynng.NNGException:
                    return
                reply = await self._answer(data)
                if reply is None:
                    continue  # a deposed leader says nothing
                with contextlib.suppress(pynng.NNGException):
                    await context.asend(m.encode(reply))
        finally:
            with contextlib.suppress(pynng.NNGException):
                context.close()

    async def _answer(self, data: bytes) -> m.LeaderMessage | None:
        try:
            said = m.decode(data)
        except msgspec.DecodeError as exc:
            log.warning("replication: undecodable message", error=str(exc))
            return m.Hello(epoch=self.epoch, log_id=b"", size=0)  # nothing of the journal
        if not isinstance(said, m.Ack | m.Refused):
            return m.Hello(epoch=self.epoch, log_id=b"", size=0)
        if self._auth is not None and not self._auth.accepts(said.auth):
            log.warning("replication: a follower without the auth token", replica=said.replica)
            await asyncio.sleep(self.settings.heartbeat)  # no tight loop for a misconfigured one
            # Nothing of the journal; and a follower that knows ``refused`` stops asking.
            return m.Hello(epoch=self.epoch, log_id=b"", size=0, refused=m.UNAUTHORIZED)
        if isinstance(said, m.Ack):
            self.tracker.acked(said.replica or "?", said.log_id, said.durable, self._clock())
            self.release()
        if not self._leading():
            return None
        state = self._state()
        decision = sender.answer(said, state)
        if isinstance(decision, sender.Hold):
            grew = self._grew
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(grew.wait(), self.settings.heartbeat)
            if not self._leading():
                return None
            state = self._state()  # one state for the decision and the message it makes
            decision = sender.answer(said, state)
        match decision:
            case sender.StepDown(epoch=epoch):
                log.warning("replication: a follower has seen a newer term", epoch=epoch)
                self._on_step_down(epoch)
                return None
            case sender.Incompatible():
                log.error("replication: a follower speaks another stream version")
                await asyncio.sleep(self.settings.heartbeat)
                return sender.heartbeat(state)
            case sender.SendTail() | sender.SendSnapshot():
                data = self._log.read(decision.offset, state.size)
                return sender.message(decision, state, data)
        return sender.heartbeat(state)  # nothing new within a heartbeat

    def _state(self) -> sender.LogState:
        return sender.LogState(self.epoch, self._log.log_id, self._durable)

    def close(self) -> None:
        self._journal.on_commit = None
        self._journal.on_rewrite = None
        if self._marking is not None:
            self._marking.cancel()
        self.fail(NotLeading("this control plane stopped leading"))
        self._log.close()


def _log_mode(mode: Mode, in_sync: list[str], wanted: int) -> None:
    if mode is Mode.REPLICATED:
        log.info("replication: acknowledging replicated writes", in_sync=in_sync)
    elif mode is Mode.ALONE:
        log.warning(
            "replication: too few followers in sync; acknowledging on this disk alone",
            in_sync=in_sync,
            sync_replicas=wanted,
        )
    else:
        log.warning(
            "replication: too few followers in sync; refusing writes (--require-sync)",
            in_sync=in_sync,
            sync_replicas=wanted,
        )
