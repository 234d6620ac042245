"""Leader election on etcd v3: a lease, and a transaction creating ``<prefix>/leader``.

A candidate grants itself a lease and, in one transaction, creates the leader key bound to
it if the key does not exist (value: JSON of its id and addresses). The key's create
revision is the term's epoch: etcd's revisions only grow, so every later term has a larger
one. The leader keeps the lease alive every retry period and checks the key is still the
one it created; a leader that has not renewed within its renew deadline (shorter than the
lease) reports the loss at once, before etcd can let anyone else take the key. Followers
watch the key and campaign again when it is deleted (its lease expired or was revoked).
Resigning deletes the key if it is still ours (compared on create revision), then revokes
the lease. A replica that does not campaign still reads and watches the key (``watch``),
so a restarted follower learns the leader at once.

Ending a term early (``depose``, for a leader proven gone) deletes the key in a
transaction that also requires the key ``<prefix>/alone`` to be absent: a leader puts it
(on its own lease, in a transaction on its term) before it acknowledges anything its
followers may lack, and deletes it once they have it all. Either the leader's mark or the
deposition comes first in etcd's order, so a term is never ended under a leader that
acknowledges alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

import structlog

from fastworker_control_plane.election import _etcd_wire as wire
from fastworker_control_plane.election._etcd_http import EtcdHttp
from fastworker_control_plane.election.base import Clock, Elector
from fastworker_control_plane.election.errors import CoordinatorRejected, ElectionError
from fastworker_control_plane.election.settings import EtcdTarget, LeaseTiming
from fastworker_control_plane.election.terms import Term

log = structlog.get_logger(__name__)


class EtcdElector(Elector):
    """An ``Elector`` backed by etcd v3 (3.4 or later) through its JSON gateway."""

    def __init__(
        self,
        target: EtcdTarget,
        candidate_id: str,
        addresses: tuple[str, ...] = (),
        timing: LeaseTiming | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(candidate_id, addresses, timing, clock)
        self.target = target
        self._http = EtcdHttp(target.endpoints, request_timeout=self.timing.retry_period)
        self._lease: int | None = None
        self._stale_leases: list[int] = []
        self._value = wire.candidate_value(candidate_id, self.addresses)
        self._candidate = False  # campaigning; otherwise only watching the key

    async def start(self) -> None:
        if not self._candidate:
            await self._stop_campaign()  # a watch only: campaign now, not after it
        self._candidate = True
        self._start_campaign("the etcd campaign", self._campaign_once)

    async def watch(self) -> None:
        if self._campaign is None or self._campaign.done():
            self._candidate = False
            self._start_campaign("the etcd watch", self._campaign_once)

    async def depose(self, term: Term) -> bool:
        request = wire.depose_request(self.target.leader_key, self.target.alone_key, term.epoch)
        deposed = wire.txn_succeeded(await self._http.post(wire.TXN, request))
        log.info("election.depose", epoch=term.epoch, leader=term.leader_id, ended=deposed)
        return deposed

    async def record_alone(self, alone: bool) -> bool:
        term, lease = self.leading(), self._lease
        if term is None or lease is None:
            return False
        target = self.target
        request = wire.alone_request(target.leader_key, target.alone_key, term.epoch, lease, alone)
        if not wire.txn_succeeded(await self._http.post(wire.TXN, request)):
            self._lose("leader key deleted or replaced")
            return False
        return True

    async def resign(self) -> None:
        await self._stop_campaign()
        term = self._lose("resigned")
        lease, self._lease = self._lease, None
        if term is not None:
            with contextlib.suppress(ElectionError):
                await self._http.post(
                    wire.TXN, wire.resign_request(self.target.leader_key, term.epoch)
                )
        if lease is not None:
            self._stale_leases.append(lease)
        with contextlib.suppress(ElectionError):
            await self._revoke_stale()

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self.resign()
        finally:
            await self._http.close()
            self._end_events()

    # the campaign (run again and again by ``Elector._start_campaign``)

    async def _campaign_once(self) -> None:
        await self._revoke_stale()
        key = self.target.leader_key
        holder, revision = wire.range_result(
            await self._http.post(wire.RANGE, wire.range_request(key))
        )
        if holder is None and self._candidate:
            sent_at = self.clock()
            ttl = max(1, math.ceil(self.timing.lease_duration))
            lease = wire.lease_id(await self._http.post(wire.GRANT, wire.grant_request(ttl)))
            self._stale_leases.append(lease)
            outcome = wire.campaign_result(
                await self._http.post(wire.TXN, wire.campaign_request(key, self._value, lease)),
                self._value,
                lease,
            )
            if outcome.won and outcome.holder is not None:
                self._stale_leases.remove(lease)
                self._lease = lease
                term = wire.term_of(outcome.holder)
                self._win(term, sent_at)
                log.info("election.won", epoch=term.epoch, candidate=self.candidate_id)
                await self._hold(term, lease)
                return
            await self._revoke_stale()
            holder, revision = outcome.holder, outcome.revision
        self._observe(wire.term_of(holder) if holder is not None else None)
        if holder is not None or not self._candidate:
            await self._wait_for_deletion(revision)

    async def _hold(self, term: Term, lease: int) -> None:
        """Renew until the term is lost; on return this candidate no longer leads."""
        try:
            while self.leading() is not None:
                await asyncio.sleep(self.timing.retry_period)
                if self.leading() is None:
                    return
                sent_at = self.clock()
                try:
                    reason = await self._renew(term, lease)
                except ElectionError as exc:
                    log.warning("election.renew_failed", epoch=term.epoch, error=str(exc))
                    continue
                if reason is not None:
                    self._lose(reason)
                    return
                self._renewed(sent_at)
        finally:
            if self.leading() is None and self._lease == lease:
                # Revoking frees the key at once if it is still ours (say etcd came back).
                self._lease = None
                self._stale_leases.append(lease)

    async def _renew(self, term: Term, lease: int) -> str | None:
        """None when the lease and key are still ours, else why the term is over."""
        valid = self._tenure.valid_until if self._tenure is not None else self.clock()
        budget = max(0.05, min(self.timing.retry_period, valid - self.clock()))
        ttl = wire.keepalive_ttl(
            await self._http.post(wire.KEEPALIVE, wire.keepalive_request(lease), timeout=budget)
        )
        if ttl <= 0:
            return "lease expired"
        kv, _ = wire.range_result(
            await self._http.post(
                wire.RANGE, wire.range_request(self.target.leader_key), timeout=budget
            )
        )
        if kv is None or kv.create_revision != term.epoch:
            return "leader key deleted or replaced"
        return None

    async def _wait_for_deletion(self, revision: int) -> None:
        """Until the leader key is deleted after ``revision``, or a lease duration passes
        (a key created meanwhile is observed)."""
        request = wire.watch_request(self.target.leader_key, revision + 1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timing.lease_duration):
                async with contextlib.aclosing(self._http.watch(request)) as stream:
                    async for message in stream:
                        update = wire.watch_update(message)
                        if update.deleted:
                            self._observe(None)
                            return
                        if update.created is not None:
                            self._observe(wire.term_of(update.created))
                        if update.canceled:
                            return

    async def _revoke_stale(self) -> None:
        """Revoke leases we no longer use; raises ``CoordinatorUnavailable`` to retry later."""
        while self._stale_leases:
            lease = self._stale_leases[0]
            # Rejected means unknown to etcd (expired): either way nothing is left to free.
            with contextlib.suppress(CoordinatorRejected):
                await self._http.post(wire.REVOKE, wire.revoke_request(lease))
            self._stale_leases.pop(0)
