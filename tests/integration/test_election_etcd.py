"""Leader election against a real etcd (Debian's etcd-server 3.4), started per test.

In-process candidates are ``EtcdElector``s; a candidate that must be paused or killed runs
in its own process (``election_candidate.py``) and tells its events on stdout. Every wait
polls a condition against a deadline.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import etcd_server
import pytest
from etcd_server import EtcdServer

from fastworker.testing import free_port_block
from fastworker_control_plane.election import (
    BecameLeader,
    ElectionEvent,
    ElectionFailed,
    Elector,
    LostLeadership,
    ObservedLeader,
    Term,
    elector_from_url,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not etcd_server.runnable(), reason="install Debian's etcd-server (scripts/test does it)"
    ),
]

CANDIDATE = Path(__file__).with_name("election_candidate.py")
POLL = 0.01


async def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition`` until true; the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(POLL)
    return time.monotonic()


class Recorded:
    """An in-process elector and the events it reported, each with its arrival time."""

    def __init__(self, elector: Elector) -> None:
        self.elector = elector
        self.events: list[tuple[float, ElectionEvent]] = []
        self._task = asyncio.create_task(self._collect())

    async def _collect(self) -> None:
        async for event in self.elector.events():
            self.events.append((time.monotonic(), event))

    def elected(self) -> list[tuple[float, BecameLeader]]:
        return [(t, e) for t, e in self.events if isinstance(e, BecameLeader)]

    def lost(self) -> list[tuple[float, LostLeadership]]:
        return [(t, e) for t, e in self.events if isinstance(e, LostLeadership)]

    async def close(self) -> None:
        await self.elector.close()
        await asyncio.wait_for(self._task, 5)


class Candidate:
    """A candidate in a subprocess; ``lines`` are its JSON reports."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(cls, url: str, name: str, lease: float) -> Candidate:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CANDIDATE),
            url,
            name,
            str(lease),
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            if line.startswith(b"{"):  # structlog's lines go to stdout too
                self.lines.append(json.loads(line))

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line.get("event") == kind]

    async def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        await self.proc.wait()
        await asyncio.wait_for(self._reader, 5)


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    with EtcdServer(tmp_path) as server:
        yield server


@pytest.fixture
async def candidates(etcd: EtcdServer) -> AsyncIterator[Callable[..., Recorded]]:
    made: list[Recorded] = []

    def make(name: str, prefix: str = "fw", lease: float = 2.0) -> Recorded:
        elector = elector_from_url(etcd.url(prefix), name, (f"{name}:5555",), lease_duration=lease)
        made.append(Recorded(elector))
        return made[-1]

    yield make
    for recorded in made:
        await recorded.close()


async def test_two_candidates_elect_exactly_one_leader_and_epochs_grow_across_terms(
    candidates: Callable[..., Recorded],
) -> None:
    # Given two candidates campaigning for the same prefix
    a, b = candidates("a"), candidates("b")
    both_led = False

    async def watch_overlap() -> None:
        nonlocal both_led
        while True:
            both_led |= a.elector.leading() is not None and b.elector.leading() is not None
            await asyncio.sleep(0.005)

    overlap = asyncio.create_task(watch_overlap())
    await a.elector.start()
    await b.elector.start()
    # Then exactly one leads, and the other sees it as leader
    await wait_until(lambda: bool(a.elected() or b.elected()), 5, "a first leader")
    first, second = (a, b) if a.elected() else (b, a)
    term1 = first.elected()[0][1].term
    await wait_until(
        lambda: any(isinstance(e, ObservedLeader) and e.term == term1 for _, e in second.events),
        5,
        "the follower observes the leader",
    )
    assert second.elector.leading() is None
    # When the leader resigns, the other leads with a greater epoch
    await first.elector.resign()
    await wait_until(lambda: bool(second.elected()), 5, "the second term")
    term2 = second.elected()[0][1].term
    assert term2.epoch > term1.epoch
    assert first.lost()[0][1].reason == "resigned"
    # And a third term, back to the first candidate, has a greater epoch still
    await first.elector.start()
    await second.elector.resign()
    await wait_until(lambda: len(first.elected()) == 2, 5, "the third term")
    assert first.elected()[1][1].term.epoch > term2.epoch
    overlap.cancel()
    assert not both_led


async def test_a_closed_leader_hands_over_at_once(candidates: Callable[..., Recorded]) -> None:
    # Given a leader and a follower with a 2 s lease
    a, b = candidates("a"), candidates("b")
    await a.elector.start()
    await wait_until(lambda: bool(a.elected()), 5, "a leads")
    await b.elector.start()
    await wait_until(lambda: b.elector.leader is not None, 5, "b sees a")
    # When the leader closes
    closed_at = time.monotonic()
    await a.close()
    # Then the follower leads within the lease duration (resigning deletes the key)
    took = await wait_until(lambda: bool(b.elected()), 2.0, "b takes over") - closed_at
    print(f"\nhandover after close: {took * 1000:.0f} ms")


async def test_a_killed_leader_is_replaced_once_its_5s_lease_expires(
    etcd: EtcdServer, candidates: Callable[..., Recorded]
) -> None:
    # Given a leader in another process and a follower here, with the default 5 s lease
    leader = await Candidate.spawn(etcd.url("fw"), "old", 5.0)
    try:
        await wait_until(lambda: bool(leader.events("elected")), 10, "the subprocess leads")
        b = candidates("b", lease=5.0)
        await b.elector.start()
        await wait_until(lambda: b.elector.leader is not None, 5, "b sees the leader")
        # When the leader is killed
        leader.proc.kill()
        killed_at = time.monotonic()
        # Then the follower takes over after the lease expires, not before the old term ends
        took = await wait_until(lambda: bool(b.elected()), 8, "b takes over") - killed_at
        assert b.elected()[0][1].term.epoch > leader.events("elected")[0]["epoch"]
        print(f"\ntakeover after kill -9 (lease 5 s): {took:.2f} s")
        assert took <= 5.0 + 1.5
    finally:
        await leader.stop()


async def test_a_paused_leader_loses_the_key_and_reports_the_loss_on_resume(
    etcd: EtcdServer, candidates: Callable[..., Recorded]
) -> None:
    # Given a leader in another process and a follower here, lease 2 s
    leader = await Candidate.spawn(etcd.url("fw"), "paused", 2.0)
    try:
        await wait_until(lambda: bool(leader.events("elected")), 10, "the subprocess leads")
        old_epoch = leader.events("elected")[0]["epoch"]
        b = candidates("b")
        await b.elector.start()
        await wait_until(lambda: b.elector.leader is not None, 5, "b sees the leader")
        # When the leader is stopped past its lease
        leader.proc.send_signal(signal.SIGSTOP)
        await wait_until(lambda: bool(b.elected()), 6, "b takes over")
        assert b.elected()[0][1].term.epoch > old_epoch
        # And resumed
        resumed_at = time.monotonic()
        leader.proc.send_signal(signal.SIGCONT)
        await wait_until(lambda: bool(leader.events("lost")), 5, "the old leader reports loss")
        await wait_until(
            lambda: any(line["t"] > resumed_at and "tick" in line for line in leader.lines),
            5,
            "a tick after the resume",
        )
        # Then it never acted as leader after waking: every check said "not leading"
        after = [line for line in leader.lines if line["t"] >= resumed_at]
        assert all(line["tick"] is None for line in after if "tick" in line), after[:5]
        assert leader.events("lost")[0]["epoch"] == old_epoch
        assert len(leader.events("elected")) == 1
        assert b.elector.leading() is not None
    finally:
        await leader.stop()


async def test_with_etcd_stopped_the_leader_steps_down_by_its_deadline_and_campaigns_again(
    etcd: EtcdServer, candidates: Callable[..., Recorded]
) -> None:
    # Given a leader (lease 2 s, renew deadline 1.33 s)
    a = candidates("a")
    await a.elector.start()
    await wait_until(lambda: bool(a.elected()), 5, "a leads")
    first_epoch = a.elected()[0][1].term.epoch
    # When etcd stops
    tenure = a.elector._tenure
    assert tenure is not None
    etcd.stop()
    stopped_at = time.monotonic()
    # Then the leader reports loss no later than its renew deadline
    lost_at = await wait_until(lambda: bool(a.lost()), 3, "a reports loss")
    assert lost_at <= tenure.valid_until + 0.1
    assert lost_at <= stopped_at + a.elector.timing.renew_deadline + 0.1
    assert a.elector.leading() is None
    print(f"\nloss reported {lost_at - stopped_at:.2f} s after etcd stopped")
    # And when etcd is back, campaigning resumes and a new term begins
    etcd.start()
    back_at = time.monotonic()
    won_at = await wait_until(lambda: len(a.elected()) == 2, 8, "a leads again")
    assert a.elected()[1][1].term.epoch > first_epoch
    print(f"leader again {won_at - back_at:.2f} s after etcd came back")


async def test_a_leader_whose_key_is_deleted_by_hand_steps_down_within_a_retry_period(
    etcd: EtcdServer, candidates: Callable[..., Recorded]
) -> None:
    # Given a leader, reached through a dead first endpoint and the live one
    dead = free_port_block()
    elector = elector_from_url(
        f"etcd://127.0.0.1:{dead},{etcd.endpoint}/fw", "a", (), lease_duration=2.0
    )
    a = Recorded(elector)
    try:
        await a.elector.start()
        await wait_until(lambda: bool(a.elected()), 5, "a leads past the dead endpoint")
        # When an operator deletes the leader key
        async with aiohttp.ClientSession() as http:
            body = {"key": base64.b64encode(b"/fw/leader").decode()}
            async with http.post(f"http://{etcd.endpoint}/v3/kv/deleterange", json=body) as r:
                assert r.status == 200
        deleted_at = time.monotonic()
        # Then the leader reports the loss at its next renewal, and campaigns again
        lost_at = await wait_until(lambda: bool(a.lost()), 2, "a reports loss")
        assert a.lost()[0][1].reason == "leader key deleted or replaced"
        assert lost_at - deleted_at <= a.elector.timing.retry_period + 0.3
        await wait_until(lambda: len(a.elected()) == 2, 5, "a leads again")
        assert a.elected()[1][1].term.epoch > a.elected()[0][1].term.epoch
    finally:
        await a.close()


async def test_an_etcd_that_requires_credentials_ends_the_campaign_with_a_clear_error(
    etcd: EtcdServer,
) -> None:
    # Given an etcd with its auth turned on (this elector has no credentials to offer)
    etcd.require_credentials()
    elector = elector_from_url(etcd.url("fw"), "a", (), lease_duration=2.0)
    try:
        # When it campaigns
        await elector.start()
        # Then its campaign ends at once, and its events say why, instead of retrying forever
        with pytest.raises(ElectionFailed, match="etcd refused this control plane"):
            await asyncio.wait_for(every_event(elector), 5)
        assert elector.leading() is None
        with pytest.raises(ElectionFailed):
            await elector.start()
    finally:
        await elector.close()


async def every_event(elector: Elector) -> list[ElectionEvent]:
    return [event async for event in elector.events()]


async def leading_and_seen(
    candidates: Callable[..., Recorded],
) -> tuple[Recorded, Recorded, Term]:
    """``a`` leading with a 30 s lease, ``b`` campaigning and seeing it; ``a``'s term."""
    a, b = candidates("a", lease=30.0), candidates("b", lease=30.0)
    await a.elector.start()
    await wait_until(lambda: bool(a.elected()), 5, "a leads")
    await b.elector.start()
    await wait_until(lambda: b.elector.leader is not None, 5, "b sees a")
    return a, b, a.elected()[0][1].term


async def test_a_leader_deposed_before_its_lease_ends_is_replaced_at_once(
    candidates: Callable[..., Recorded],
) -> None:
    # Given a leader with a long lease (30 s), and a candidate watching it
    a, b, term = await leading_and_seen(candidates)
    # When b deposes a's term (its process proven gone, in the replicas' use)
    assert await b.elector.depose(term)
    # Then b leads at once, not after the lease, and a learns its term is over
    await wait_until(lambda: bool(b.elected()), 5, "b takes over")
    await wait_until(lambda: bool(a.lost()), 10, "a learns it lost")
    assert a.lost()[0][1].reason == "leader key deleted or replaced"
    # And deposing a term that is over changes nothing
    assert not await a.elector.depose(term)
    assert b.elector.leading() is not None


async def test_a_leader_marked_alone_cannot_be_deposed_until_it_clears_the_mark(
    candidates: Callable[..., Recorded],
) -> None:
    # Given a leader that marked itself acknowledging alone
    a, b, term = await leading_and_seen(candidates)
    assert await a.elector.record_alone(True)
    # Then no one may depose it: what it acknowledged alone would be left behind
    assert not await b.elector.depose(term)
    assert a.elector.leading() == term
    # And once it clears the mark (its followers have it all), it may be
    assert await a.elector.record_alone(False)
    assert await b.elector.depose(term)
    await wait_until(lambda: bool(b.elected()), 5, "b takes over")
    # And the deposed leader can no longer mark anything: its term is over
    assert not await a.elector.record_alone(True)


async def test_a_candidate_that_only_watches_learns_the_leader_at_once_and_never_leads(
    candidates: Callable[..., Recorded],
) -> None:
    # Given a leader, and a second candidate that watches without campaigning
    a, b = candidates("a", lease=30.0), candidates("b", lease=30.0)
    await a.elector.start()
    await wait_until(lambda: bool(a.elected()), 5, "a leads")
    await b.elector.watch()
    # Then it learns who leads at once (not after a lease)
    await wait_until(lambda: b.elector.leader is not None, 5, "b sees a")
    assert b.elector.leader == a.elected()[0][1].term
    # And when the leader resigns it does not take over, until it campaigns
    await a.elector.resign()
    await wait_until(lambda: b.elector.leader is None, 5, "b sees no leader")
    assert not b.elected()
    await b.elector.start()
    await wait_until(lambda: bool(b.elected()), 5, "b leads once it campaigns")
