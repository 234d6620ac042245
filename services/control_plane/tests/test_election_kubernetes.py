"""The Lease elector driving the state machine over an in-memory API server, on a fake clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from fastworker_control_plane.election import (
    BecameLeader,
    Conflict,
    CoordinatorRefused,
    CoordinatorUnavailable,
    ElectionEvent,
    ElectionFailed,
    Elector,
    LeaseTiming,
    LostLeadership,
    ObservedLeader,
    Term,
)
from fastworker_control_plane.election.kube_api import InMemoryLease
from fastworker_control_plane.election.kube_lease import LeaseRecord
from fastworker_control_plane.election.kubernetes import KubernetesElector

TIMING = LeaseTiming.from_lease(5.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def drain(elector: KubernetesElector) -> list[ElectionEvent]:
    out: list[ElectionEvent] = []
    while not elector._events.empty():
        event = elector._events.get_nowait()
        assert event is not None
        assert not isinstance(event, ElectionFailed)
        out.append(event)
    return out


def pair() -> tuple[InMemoryLease, FakeClock, KubernetesElector, KubernetesElector]:
    api, clock = InMemoryLease(), FakeClock()

    def wall() -> datetime:
        return datetime.fromtimestamp(clock.now, UTC)

    a = KubernetesElector(api, "a", ("a:5555",), TIMING, clock, wall)
    b = KubernetesElector(api, "b", ("b:5555",), TIMING, clock, wall)
    return api, clock, a, b


async def test_the_first_candidate_creates_the_lease_and_the_second_follows() -> None:
    api, _clock, a, b = pair()
    await a.attempt()
    await b.attempt()
    assert drain(a) == [BecameLeader(Term("a", 1, ("a:5555",)))]
    assert drain(b) == [ObservedLeader(Term("a", 1, ("a:5555",)))]
    assert api.record is not None
    assert api.record.holder == "a"


async def test_a_leader_that_stops_renewing_fences_itself_before_the_other_takes_over() -> None:
    _api, clock, a, b = pair()
    await a.attempt()
    await b.attempt()
    drain(a)
    # When a stops renewing, it stops leading at its renew deadline...
    clock.now += TIMING.renew_deadline
    assert a.leading() is None
    assert [type(e) for e in drain(a)] == [LostLeadership]
    # ...while b still waits until a whole lease has passed since it saw a's last write
    await b.attempt()
    assert b.leading() is None
    clock.now += TIMING.lease_duration - TIMING.renew_deadline
    await b.attempt()
    assert b.leading() == Term("b", 2, ("b:5555",))


async def test_renewals_keep_the_term_and_its_epoch() -> None:
    _api, clock, a, b = pair()
    await a.attempt()
    for _ in range(10):
        clock.now += TIMING.retry_period
        await a.attempt()
        await b.attempt()
    assert a.leading() == Term("a", 1, ("a:5555",))
    assert [type(e) for e in drain(a)] == [BecameLeader]
    assert b.leading() is None


async def test_a_conflicting_write_is_followed_by_a_fresh_read() -> None:
    api, clock, a, b = pair()
    await a.attempt()
    # Given b decided on a stale read: a renewed between b's read and b's write
    original_get = api.get

    async def get_then_a_renews() -> LeaseRecord | None:
        read = await original_get()
        api.get = original_get  # type: ignore[method-assign]
        clock.now += 1
        await a.attempt()
        return read

    clock.now += 6  # a looks expired to b
    b.machine.decide(await api.get(), clock.now - 6, datetime.now(UTC))  # b saw it at t
    api.get = get_then_a_renews  # type: ignore[method-assign]
    original_replace, conflicts = api.replace, []

    async def replace_noting_conflicts(record: LeaseRecord) -> LeaseRecord:
        try:
            return await original_replace(record)
        except Conflict as exc:
            conflicts.append(exc)
            raise

    api.replace = replace_noting_conflicts  # type: ignore[method-assign]
    await b.attempt()
    assert len(conflicts) == 1
    # Then b's write got 409, b read again and now waits on a's fresh renewal
    assert b.leading() is None
    assert any(isinstance(e, ObservedLeader) for e in drain(b))


async def test_resigning_releases_the_lease_for_the_next_candidate_at_once() -> None:
    api, _clock, a, b = pair()
    await a.attempt()
    await a.resign()
    assert api.record is not None
    assert api.record.holder == ""
    assert [type(e) for e in drain(a)] == [BecameLeader, LostLeadership]
    await b.attempt()
    assert b.leading() == Term("b", 2, ("b:5555",))


async def test_an_unreachable_api_server_costs_the_leader_its_term_by_the_deadline() -> None:
    api, clock, a, _b = pair()
    await a.attempt()
    api.available = False
    clock.now += TIMING.retry_period
    with pytest.raises(CoordinatorUnavailable):
        await a.attempt()
    assert a.leading() is not None
    clock.now += TIMING.renew_deadline
    assert a.leading() is None
    await a.close()
    events = [e async for e in a.events()]
    assert [type(e) for e in events] == [BecameLeader, LostLeadership]


class RefusingLease(InMemoryLease):
    """An API server that refuses the pod's service account (its Role lacks the Lease)."""

    async def get(self) -> LeaseRecord | None:
        raise CoordinatorRefused("the Kubernetes API refused GET on the Lease with 403", 403)


async def test_a_refused_candidate_stops_campaigning_and_its_events_say_why() -> None:
    # Given an API server that refuses this candidate
    elector = KubernetesElector(RefusingLease(), "a", (), LeaseTiming.from_lease(1.0))
    # When it campaigns
    await elector.start()
    # Then the campaign ends for good, and the event feed raises why
    with pytest.raises(ElectionFailed, match="403"):
        await asyncio.wait_for(every_event(elector), 5)
    assert elector.leading() is None
    with pytest.raises(ElectionFailed):
        await elector.start()
    await elector.close()


async def test_an_unavailable_api_server_is_retried_not_fatal() -> None:
    # Given an API server that is down for a while
    api = InMemoryLease()
    api.available = False
    elector = KubernetesElector(api, "a", (), LeaseTiming.from_lease(0.5))
    await elector.start()
    await asyncio.sleep(0.25)  # a few retry periods of 0.1 s fail
    # When it comes back, the campaign (still running) wins
    api.available = True
    async with asyncio.timeout(5):
        async for event in elector.events():
            if isinstance(event, BecameLeader):
                break
    assert elector.leading() is not None
    await elector.close()


async def every_event(elector: Elector) -> list[ElectionEvent]:
    return [event async for event in elector.events()]
