"""A replicated control plane process: it campaigns, follows while another leads, leads
when elected, and steps down the moment it may no longer lead.

Following: the state dir holds a mirror of the leader's journal (``FollowerLink``); the
discovery port announces the leader's addresses (so peers dialing any replica find the
leader); ``/readyz`` answers 503 (only the leader is Ready, so a Kubernetes Service
routes to it); no client port is bound.

Leading: the mirror is closed and an ordinary ``ControlPlane`` starts on the state dir
with a ``Leadership``: it replays the journal, serves clients and subworkers, ships the
journal to followers, and acknowledges a write only once enough followers have it. Every
reply is fenced by ``Elector.leading()`` (the local clock of the renew deadline).

Stepping down (the term is lost, or a follower has seen a newer one): the control plane
closes (its fence already refuses every reply) and the process follows again. A
follower that is catching up does not campaign until there has been no leader for a
whole lease, so a caught-up follower is elected first (three replicas, or a full
restart: then every replica waits one lease, and the first to campaign leads).

A leader whose process is gone (``ha.gone``: its connection dropped, its port refuses)
is deposed at once by a caught-up follower, which is then elected without waiting for
the lease; the coordinator refuses that while the leader has marked itself
acknowledging alone (``Elector.depose``), so nothing acknowledged is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

import structlog

from fastworker import TaskRegistry, Unauthorized, __version__, default_registry
from fastworker_common.supervision import Fault, Policy, Supervisor, TaskDied
from fastworker_control_plane.app import ControlPlane, announcement
from fastworker_control_plane.config import ControlPlaneConfig
from fastworker_control_plane.election import (
    ElectionError,
    ElectionEvent,
    ElectionFailed,
    Elector,
    Term,
    elector_from_url,
)
from fastworker_control_plane.ha import addresses, gone
from fastworker_control_plane.ha.follower import FollowerLink
from fastworker_control_plane.ha.leader import Leadership, ReplicationSettings
from fastworker_control_plane.ha.metrics import ReplicaCollector
from fastworker_control_plane.ha.standby import Standby
from fastworker_control_plane.replication.follower import Phase
from fastworker_control_plane.replication.replica import remember_epoch

log = structlog.get_logger(__name__)

POLL = 0.5  # seconds between checks of the fence while leading, whatever events say


class ReplicatedControlPlane:
    def __init__(self, config: ControlPlaneConfig, registry: TaskRegistry | None = None) -> None:
        assert config.leader_election is not None
        assert config.state_dir is not None
        self.config = config
        self.registry = registry if registry is not None else default_registry
        # Unique per process: a restarted replica never inherits a term of its last life.
        self.candidate_id = f"{config.replica_name}-{uuid.uuid4().hex[:8]}"
        self.state_dir = Path(config.state_dir)
        self.role = "starting"
        self.epoch = 0  # the newest term seen
        self.failovers = 0  # terms seen after the first
        self.leader: ControlPlane | None = None
        self.link: FollowerLink | None = None
        self._elector: Elector | None = None
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._stepped_down = False
        self._campaigning = False
        self._leaderless_since: float | None = None  # monotonic: since no leader was seen
        # A task this replica cannot run without that dies stops it (see ``supervision``).
        self._supervisor = Supervisor(self._faulted, permanent=(ElectionFailed, Unauthorized))
        self.collector = ReplicaCollector(self)

    # --- the process ----------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stop.set()
        self._changed.set()

    async def run(self) -> None:
        """Follow or lead until ``request_stop``; raises ``TaskDied`` if a leader term
        ended with a fault (after giving the term up, so a follower takes over at once), or
        a task the replica cannot run without died (the follower link, the election)."""
        elector = elector_from_url(
            self.config.leader_election or "",
            self.candidate_id,
            addresses.published(announcement(self.config, ""), self._replication_address()),
            lease_duration=self.config.lease_duration,
        )
        self._elector = elector
        # The watcher's death is logged: the loops below check the elector every ``POLL``.
        watching = self._supervisor.spawn(
            "the election watcher", self._watch(elector), policy=Policy.LOG
        )
        try:
            while not self._stop.is_set():
                term = await self._follow(elector)
                if term is None:
                    break
                await self._lead(elector, term)
        finally:
            self._supervisor.stop()
            await elector.close()
            await self._supervisor.end(watching)
            log.info("replica stopped", replica=self.candidate_id)
        fault = self._supervisor.fault
        if fault is not None:
            raise TaskDied(f"stopped: {fault}") from fault.error

    def _faulted(self, fault: Fault) -> None:
        self.request_stop()  # ``run`` closes everything, then raises

    async def _watch(self, elector: Elector) -> None:
        try:
            async for event in elector.events():
                self._observed(event)
        except ElectionFailed as exc:  # a permanent error (credentials): no retry can help
            self._supervisor.report("the election", exc)

    def _observed(self, event: ElectionEvent) -> None:
        term = event.term
        if term is not None and term.epoch > self.epoch:
            if self.epoch:
                self.failovers += 1
            self.epoch = term.epoch
        log.info(
            "election",
            change=type(event).__name__,
            leader=None if term is None else term.leader_id,
            epoch=None if term is None else term.epoch,
        )
        self._changed.set()

    # --- following ---------------------------------------------------------------------------

    async def _follow(self, elector: Elector) -> Term | None:
        """Keep the mirror until this replica is elected (its term) or stops (None)."""
        self.role = "follower"
        link = FollowerLink(
            self.state_dir,
            self.config.replica_name,
            max_message_size=self.config.max_message_size,
            tls=self.config.tls,
            auth_token=self.config.auth_token,
        )
        self.link = link
        standby = Standby(
            self.config,
            self.collector,
            self._standby_readiness,
            self.details,
            self._supervisor,
            self._where_the_leader_is,
        )
        receiving = self._supervisor.spawn("the follower link", link.run())
        deposing = self._supervisor.spawn(
            "the leader watch", self._depose_the_gone(elector, link), policy=Policy.LOG
        )
        try:
            await elector.watch()
            await standby.start()
            while not self._stop.is_set():
                term = elector.leading()
                if term is not None:
                    return term
                observed = elector.leader
                link.follow(None if observed is None else addresses.replication_address(observed))
                standby.announce(
                    None if observed is None else addresses.announcement(observed, __version__)
                )
                await self._campaign_when_ready(elector, observed, link)
                await self._wait_for_change(POLL)
            return None
        finally:
            await self._supervisor.end(deposing)
            await self._supervisor.end(receiving)
            await standby.close()
            link.close()
            self.link = None

    async def _campaign_when_ready(
        self, elector: Elector, observed: Term | None, link: FollowerLink
    ) -> None:
        """Campaign while this mirror is caught up with its leader, or has never followed
        one; a mirror behind waits until there has been no leader for a whole lease, so
        a follower that has every acknowledged write is elected first."""
        now = time.monotonic()
        if observed is not None:
            self._leaderless_since = None
        elif self._leaderless_since is None:
            self._leaderless_since = now
        behind = link.follower.epoch > 0 and link.phase is not Phase.IN_SYNC
        leaderless = self._leaderless_since is not None and (
            now - self._leaderless_since >= self.config.lease_duration
        )
        wanted = not behind or leaderless
        if wanted and not self._campaigning:
            self._campaigning = True
            await elector.start()
        elif not wanted and self._campaigning:
            self._campaigning = False
            await elector.resign()  # not leading: it only stops campaigning
            await elector.watch()

    async def _depose_the_gone(self, elector: Elector, link: FollowerLink) -> None:
        """Depose a leader whose process is gone as soon as its connection drops, if this
        mirror holds everything that leader sent: the lease would keep every replica
        waiting for a leader that cannot renew it."""
        while True:
            await link.lost.wait()
            term = elector.leader
            address = None if term is None else addresses.replication_address(term)
            if term is None or address is None or elector.leading() is not None:
                await link.found.wait()
                continue
            caught_up = link.phase is Phase.IN_SYNC
            dead = caught_up and await gone.nothing_listens(address)
            log.info(
                "replication: the connection to the leader dropped",
                leader=term.leader_id,
                epoch=term.epoch,
                caught_up=caught_up,
                refused=dead,  # nothing listens: gone, or no longer leading
            )
            if dead and link.lost.is_set() and elector.leader == term:
                with contextlib.suppress(ElectionError):
                    await elector.depose(term)
            await link.found.wait()  # the link is back, or another leader is followed

    async def _wait_for_change(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
        self._changed.clear()

    def _standby_readiness(self) -> str | None:
        leader = self._elector.leader if self._elector is not None else None
        if leader is None:
            return "follower: no leader elected yet"
        return f"follower of {leader.leader_id} (epoch {leader.epoch}): not serving"

    def _where_the_leader_is(self) -> str:
        """The answer of a follower's client ports to every request."""
        me = f"this control plane is a follower replica ({self.candidate_id}), not the leader"
        leader = self._elector.leader if self._elector is not None else None
        if leader is None:
            return f"{me}, and no leader is elected yet: retry in a moment"
        found = addresses.announcement(leader, __version__)
        where = f", submit address {found.submit[0]}" if found is not None else ""
        return (
            f"{me}: the leader is {leader.leader_id} (epoch {leader.epoch}{where}); give "
            "clients and subworkers every replica's discovery address, comma-separated, "
            "to follow whichever leads"
        )

    # --- leading -------------------------------------------------------------------------------

    async def _lead(self, elector: Elector, term: Term) -> None:
        self.role = "leader"
        self._stepped_down = False
        remember_epoch(self.state_dir, term.epoch)
        log.info("leading", replica=self.candidate_id, epoch=term.epoch)

        def leading() -> bool:
            now = elector.leading()
            return now is not None and now.epoch == term.epoch and not self._stepped_down

        leadership = Leadership(
            candidate_id=self.candidate_id,
            epoch=term.epoch,
            leading=leading,
            settings=ReplicationSettings(
                sync_replicas=self.config.sync_replicas, require_sync=self.config.require_sync
            ),
            on_step_down=self._step_down,
            record_alone=elector.record_alone,
            collectors=(self.collector,),
            details=self.details,
        )
        plane = ControlPlane(self.config, self.registry, leadership=leadership)
        self.leader = plane
        running = asyncio.get_running_loop().create_task(plane.run())
        try:
            while leading() and not self._stop.is_set() and not running.done():
                await self._wait_for_change(POLL)
        finally:
            self.role = "stepping down"
            plane.request_stop()
            outcome = await asyncio.gather(running, return_exceptions=True)
            self.leader = None
        failed = outcome[0]
        if self._stepped_down or failed is not None:
            # Our lease may still be valid: give the term up so another replica leads now.
            await elector.resign()
            self._campaigning = False
        log.warning("stepped down", replica=self.candidate_id, epoch=term.epoch)
        if isinstance(failed, TaskDied):
            raise failed
        if isinstance(failed, BaseException):
            raise TaskDied(f"the leader stopped: {failed}") from failed

    def _step_down(self, epoch: int) -> None:
        """A follower has seen a newer term than ours: stop leading at once."""
        self._stepped_down = True
        self.epoch = max(self.epoch, epoch)
        self._changed.set()

    # --- what it says about itself -----------------------------------------------------------

    def details(self) -> dict[str, object]:
        """``/readyz`` detail: role, term and, on the leader, the followers."""
        found: dict[str, object] = {
            "role": self.role,
            "epoch": self.epoch,
            "replica": self.candidate_id,
        }
        plane = self.leader
        replication = None if plane is None else plane.replication
        if replication is not None:
            found["replication"] = replication.mode.value
            found["in_sync"] = replication.tracker.in_sync
        elif self.link is not None:
            found["phase"] = self.link.phase.value
        return found

    def _replication_address(self) -> str:
        return self.config.advertise(self.config.replication_port_number)


def replicated_or_alone(
    config: ControlPlaneConfig, registry: TaskRegistry | None = None
) -> ControlPlane | ReplicatedControlPlane:
    """The control plane ``config`` describes: a replica with ``leader_election``."""
    if config.leader_election is None:
        return ControlPlane(config, registry)
    return ReplicatedControlPlane(config, registry)
