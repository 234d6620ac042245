"""Leader election on a Kubernetes Lease: drives ``LeaseCandidate`` over a ``LeaseApi``.

Each attempt (every retry period) reads the Lease, lets the state machine decide, and
writes what it says; a 409 Conflict means our read was stale, so we read again at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from fastworker_control_plane.election.base import Clock, Elector
from fastworker_control_plane.election.errors import Conflict, ElectionError
from fastworker_control_plane.election.kube_api import LeaseApi
from fastworker_control_plane.election.kube_lease import (
    Create,
    Decision,
    LeaseCandidate,
    Lost,
    Update,
    Wait,
)
from fastworker_control_plane.election.settings import KubernetesTarget, LeaseTiming

log = structlog.get_logger(__name__)
WallClock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class KubernetesElector(Elector):
    """An ``Elector`` backed by a ``coordination.k8s.io/v1`` Lease."""

    def __init__(
        self,
        api: LeaseApi,
        candidate_id: str,
        addresses: tuple[str, ...] = (),
        timing: LeaseTiming | None = None,
        clock: Clock = time.monotonic,
        wall: WallClock = _utc_now,
    ) -> None:
        super().__init__(candidate_id, addresses, timing, clock)
        self.api = api
        self.wall = wall
        self.machine = LeaseCandidate(candidate_id, self.timing, self.addresses)

    @classmethod
    def in_cluster(
        cls,
        target: KubernetesTarget,
        candidate_id: str,
        addresses: tuple[str, ...] = (),
        timing: LeaseTiming | None = None,
        clock: Clock = time.monotonic,
    ) -> KubernetesElector:
        from fastworker_control_plane.election.kube_http import HttpLease

        timing = timing or LeaseTiming()
        api = HttpLease.in_cluster(target.namespace, target.name, timing.retry_period)
        return cls(api, candidate_id, addresses, timing, clock)

    async def start(self) -> None:
        self._start_campaign("the Lease campaign", self._round)

    async def watch(self) -> None:
        """Nothing: the Lease is read only while campaigning (every retry period)."""

    async def resign(self) -> None:
        await self._stop_campaign()
        if self._lose("resigned") is None:
            self.machine.abdicate()
            return
        with contextlib.suppress(ElectionError):
            read = await self.api.get()
            release = self.machine.released(self.wall(), read) if read is not None else None
            if release is not None:
                await self.api.replace(release)
        self.machine.abdicate()

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self.resign()
        finally:
            await self.api.close()
            self._end_events()

    async def _round(self) -> None:
        """One attempt, then a retry period (``Elector._start_campaign`` runs it again, and
        waits the retry period itself after an error)."""
        await self.attempt()
        await asyncio.sleep(self.timing.retry_period)

    async def attempt(self) -> None:
        """One read-decide-write round; on 409 one immediate re-read and retry."""
        for _ in range(2):
            started = self.clock()
            if self.leading() is None:
                self.machine.abdicate()  # the fence fired: the machine must agree
            decision = self.machine.decide(await self.api.get(), started, self.wall())
            try:
                await self._act(decision, started)
                return
            except Conflict:
                log.info("election.lease_conflict", candidate=self.candidate_id)
        return

    async def _act(self, decision: Decision, started: float) -> None:
        if isinstance(decision, Lost):
            self._lose(decision.reason)
            if decision.then is None:
                return
            decision = decision.then
        if isinstance(decision, Wait):
            self._observe(decision.leader)
            return
        if isinstance(decision, Create):
            written = await self.api.create(decision.record)
        else:
            written = await self.api.replace(decision.record)
        began = self.machine.written(written, started)
        if began is not None:
            self._win(began, started)
        elif isinstance(decision, Update) and not self._renewed(started):
            self.machine.abdicate()
