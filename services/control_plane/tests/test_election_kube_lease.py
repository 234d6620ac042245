"""client-go's Lease rules as a pure state machine: reads and times in, decisions out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fastworker_control_plane.election import LeaseTiming, Term
from fastworker_control_plane.election.kube_api import lease_from_json, lease_to_json
from fastworker_control_plane.election.kube_lease import (
    Create,
    LeaseCandidate,
    LeaseRecord,
    Lost,
    Update,
    Wait,
)

TIMING = LeaseTiming.from_lease(5.0)  # renew deadline 3.33 s, retry 1 s
WALL = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def held_by(holder: str, version: str = "7", transitions: int = 3, **kw: object) -> LeaseRecord:
    fields: dict[str, object] = {
        "holder": holder,
        "lease_duration_seconds": 5,
        "acquire_time": WALL,
        "renew_time": WALL,
        "lease_transitions": transitions,
        "resource_version": version,
    }
    fields.update(kw)
    return LeaseRecord(**fields)  # type: ignore[arg-type]


def stored(record: LeaseRecord, version: str) -> LeaseRecord:
    """What the API server returns for a write: the record with a new resourceVersion."""
    return replace(record, resource_version=version)


def leader(now: float = 0.0, transitions: int = 3) -> tuple[LeaseCandidate, LeaseRecord]:
    """A candidate that just acquired at ``now`` a Lease another held, and the Lease."""
    me = LeaseCandidate("me", TIMING, ("me:5555",))
    me.decide(held_by("old", transitions=transitions - 1), now - 10, WALL)
    decision = me.decide(held_by("old", transitions=transitions - 1), now, WALL)
    assert isinstance(decision, Update)
    record = stored(decision.record, "8")
    assert me.written(record, now) is not None
    return me, record


def test_an_absent_lease_is_created_with_us_holding_it_and_no_transitions() -> None:
    me = LeaseCandidate("me", TIMING, ("me:5555",))
    decision = me.decide(None, 0.0, WALL)
    assert decision == Create(
        LeaseRecord("me", 5, WALL, WALL, 0, "", ("me:5555",)),
    )
    term = me.written(stored(decision.record, "1"), 0.0)
    assert term == Term("me", 1, ("me:5555",))
    assert me.leading == term


def test_a_leader_renews_its_own_lease_keeping_acquire_time_and_transitions() -> None:
    me, record = leader(now=0.0)
    later = WALL + timedelta(seconds=1)
    decision = me.decide(record, 1.0, later)
    assert isinstance(decision, Update)
    assert not decision.acquiring
    assert decision.record.acquire_time == record.acquire_time
    assert decision.record.renew_time == later
    assert decision.record.lease_transitions == record.lease_transitions
    assert decision.record.resource_version == "8"  # optimistic concurrency on what we read
    assert me.written(stored(decision.record, "9"), 1.0) is None  # a renewal, not a new term
    assert me.renewed_at == 1.0


def test_an_unexpired_lease_of_another_is_waited_on() -> None:
    me = LeaseCandidate("me", TIMING)
    other = held_by("other")
    assert me.decide(other, 100.0, WALL) == Wait(Term("other", 4))
    assert me.decide(other, 104.999, WALL) == Wait(Term("other", 4))


def test_an_expired_lease_of_another_is_taken_with_transitions_plus_one() -> None:
    me = LeaseCandidate("me", TIMING)
    other = held_by("other", transitions=3)
    me.decide(other, 100.0, WALL)
    decision = me.decide(other, 105.0, WALL + timedelta(seconds=5))
    assert isinstance(decision, Update)
    assert decision.acquiring
    assert decision.record.holder == "me"
    assert decision.record.lease_transitions == 4
    assert decision.record.acquire_time == WALL + timedelta(seconds=5)
    assert decision.record.resource_version == "7"
    assert me.written(stored(decision.record, "8"), 105.0) == Term("me", 5)


def test_expiry_counts_from_when_we_last_saw_the_lease_change() -> None:
    me = LeaseCandidate("me", TIMING)
    me.decide(held_by("other", version="7"), 100.0, WALL)
    # The holder renewed at 103 (new resourceVersion): five more seconds from then.
    assert isinstance(me.decide(held_by("other", version="8"), 103.0, WALL), Wait)
    assert isinstance(me.decide(held_by("other", version="8"), 107.9, WALL), Wait)
    assert isinstance(me.decide(held_by("other", version="8"), 108.0, WALL), Update)


@pytest.mark.parametrize("skew", [timedelta(hours=-3), timedelta(hours=3)])
def test_other_nodes_wall_clocks_never_decide_expiry(skew: timedelta) -> None:
    # Given a holder whose renewTime is hours off from our wall clock (skewed node clocks)
    me = LeaseCandidate("me", TIMING)
    skewed = held_by("other", renew_time=WALL + skew, acquire_time=WALL + skew)
    # Then it is live for a full lease of our own clock after we first saw it, no more
    assert isinstance(me.decide(skewed, 50.0, WALL), Wait)
    assert isinstance(me.decide(skewed, 54.999, WALL), Wait)
    assert isinstance(me.decide(skewed, 55.0, WALL), Update)


def test_the_holders_lease_duration_is_used_not_ours() -> None:
    me = LeaseCandidate("me", TIMING)
    longer = held_by("other", lease_duration_seconds=15)
    me.decide(longer, 0.0, WALL)
    assert isinstance(me.decide(longer, 14.9, WALL), Wait)
    assert isinstance(me.decide(longer, 15.0, WALL), Update)


def test_a_released_lease_is_taken_at_once() -> None:
    me = LeaseCandidate("me", TIMING)
    decision = me.decide(held_by("", lease_duration_seconds=1, transitions=3), 0.0, WALL)
    assert isinstance(decision, Update)
    assert decision.acquiring
    assert decision.record.lease_transitions == 4


def test_a_lease_under_our_own_name_that_we_do_not_lead_is_not_renewed() -> None:
    # Given a restarted candidate with the same identity as the one holding the lease
    me = LeaseCandidate("me", TIMING)
    mine_before_restart = held_by("me", transitions=3)
    # Then it waits for expiry like anyone else, and then starts a new epoch
    assert me.decide(mine_before_restart, 0.0, WALL) == Wait(Term("me", 4))
    decision = me.decide(mine_before_restart, 5.0, WALL)
    assert isinstance(decision, Update)
    assert decision.acquiring
    assert decision.record.lease_transitions == 4


def test_after_a_conflict_the_next_read_decides_and_the_winner_is_waited_on() -> None:
    # Given two candidates that read the same expired lease
    a, b = LeaseCandidate("a", TIMING), LeaseCandidate("b", TIMING)
    stale = held_by("old", version="7")
    for c in (a, b):
        c.decide(stale, 0.0, WALL)
    wa, wb = a.decide(stale, 6.0, WALL), b.decide(stale, 6.0, WALL)
    assert isinstance(wa, Update)
    assert isinstance(wb, Update)
    assert wa.record.resource_version == wb.record.resource_version == "7"
    # When a's write lands (version 8) and b's is refused with 409 Conflict
    won = stored(wa.record, "8")
    assert a.written(won, 6.0) == Term("a", 5)
    # Then b, reading again, sees a fresh holder and waits a whole lease
    assert b.leading is None
    assert b.decide(won, 6.1, WALL) == Wait(Term("a", 5))
    assert isinstance(b.decide(won, 11.0, WALL), Wait)
    assert isinstance(b.decide(won, 11.1, WALL), Update)


def test_a_leader_past_its_renew_deadline_has_lost_whatever_the_lease_says() -> None:
    me, record = leader(now=0.0)
    just_before = me.decide(record, TIMING.renew_deadline - 0.001, WALL)
    assert isinstance(just_before, Update)
    assert not just_before.acquiring
    me2, record2 = leader(now=0.0)
    at_deadline = me2.decide(record2, TIMING.renew_deadline, WALL)
    assert isinstance(at_deadline, Lost)
    assert at_deadline.reason == "renew deadline passed"
    assert me2.leading is None
    # Our own record is then judged like anyone's: not renewed, waited on until it expires
    assert isinstance(at_deadline.then, Wait)


def test_a_leader_whose_lease_was_taken_has_lost() -> None:
    me, record = leader(now=0.0)
    taken = held_by("other", version="20", transitions=record.lease_transitions + 1)
    decision = me.decide(taken, 1.0, WALL)
    assert isinstance(decision, Lost)
    assert decision.reason == "lease taken by other"
    assert decision.then == Wait(Term("other", record.lease_transitions + 2))


def test_a_leader_whose_lease_was_deleted_has_lost_and_recreates_it() -> None:
    me, _ = leader(now=0.0)
    decision = me.decide(None, 1.0, WALL)
    assert isinstance(decision, Lost)
    assert isinstance(decision.then, Create)


def test_a_renewal_answered_after_the_deadline_begins_no_term() -> None:
    me, record = leader(now=0.0)
    decision = me.decide(record, 3.0, WALL)
    assert isinstance(decision, Update)
    # The fence fired while the write was in flight: the driver abdicates.
    me.abdicate()
    assert me.leading is None
    assert me.expired_at(100.0) is False


def test_releasing_writes_an_empty_holder_keeping_transitions() -> None:
    me, record = leader(now=0.0)
    release = me.released(WALL, record)
    assert release is not None
    assert release.holder == ""
    assert release.lease_duration_seconds == 1
    assert release.lease_transitions == record.lease_transitions
    assert release.resource_version == record.resource_version
    assert me.leading is None


def test_releasing_a_lease_someone_else_holds_writes_nothing() -> None:
    me, _record = leader(now=0.0)
    assert me.released(WALL, held_by("other", version="30")) is None


def test_the_lease_json_round_trips_with_addresses_in_an_annotation() -> None:
    record = LeaseRecord("me", 5, WALL, WALL + timedelta(microseconds=5), 4, "12", ("a:1", "b:2"))
    obj = lease_to_json(record, "prod", "fw-leader")
    assert obj["spec"]["renewTime"] == "2026-01-01T12:00:00.000005Z"
    assert obj["metadata"]["resourceVersion"] == "12"
    assert lease_from_json(obj) == record


def test_a_lease_with_an_empty_spec_reads_as_released() -> None:
    record = lease_from_json({"metadata": {"resourceVersion": "3"}, "spec": {}})
    assert record.holder == ""
    assert record.term() is None


def test_the_labels_a_lease_was_read_with_are_written_back_on_renewal_and_release() -> None:
    # Given a Lease made by a Helm chart, with its labels, expired and free to take
    chart = {
        "metadata": {
            "resourceVersion": "7",
            "labels": {"app.kubernetes.io/instance": "fw", "helm.sh/chart": "fastworker-1"},
        },
        "spec": {},
    }
    read = lease_from_json(chart)
    me = LeaseCandidate("me", TIMING, ("me:5555",))
    # When it is acquired, renewed and released
    taken = me.decide(read, 0.0, WALL)
    assert isinstance(taken, Update)
    written = lease_to_json(taken.record, "prod", "fw")
    assert written["metadata"]["labels"] == chart["metadata"]["labels"]
    assert me.written(stored(taken.record, "8"), 0.0) is not None
    released = me.released(WALL, stored(taken.record, "9"))
    # Then the chart's labels stay on the object every time
    assert released is not None
    rewritten = lease_to_json(released, "prod", "fw")
    assert rewritten["metadata"]["labels"] == chart["metadata"]["labels"]
