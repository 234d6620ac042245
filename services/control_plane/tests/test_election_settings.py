"""The --leader-election URL and lease timings: what is accepted, and what is refused."""

from __future__ import annotations

import pytest

from fastworker_control_plane import election
from fastworker_control_plane.election import (
    EtcdTarget,
    KubernetesTarget,
    LeaseTiming,
    elector_from_url,
    parse_election_url,
)
from fastworker_control_plane.election.etcd import EtcdElector


def test_the_public_api_is_curated() -> None:
    assert set(election.__all__) == {
        "BecameLeader",
        "Conflict",
        "CoordinatorRefused",
        "CoordinatorRejected",
        "CoordinatorUnavailable",
        "ElectionError",
        "ElectionEvent",
        "ElectionFailed",
        "Elector",
        "EtcdTarget",
        "KubernetesTarget",
        "LeaseTiming",
        "LostLeadership",
        "ObservedLeader",
        "Term",
        "elector_from_url",
        "parse_election_url",
    }


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("etcd://127.0.0.1:2379/fw", EtcdTarget(("127.0.0.1:2379",), "/fw")),
        (
            "etcd://etcd-0:2379,etcd-1.etcd:2379/a/b/",
            EtcdTarget(("etcd-0:2379", "etcd-1.etcd:2379"), "/a/b"),
        ),
        ("etcd://[::1]:2379/fw", EtcdTarget(("[::1]:2379",), "/fw")),
        ("kubernetes://fastworker-leader", KubernetesTarget(None, "fastworker-leader")),
        ("kubernetes://prod/fastworker.leader", KubernetesTarget("prod", "fastworker.leader")),
    ],
)
def test_good_urls_name_their_coordinator(url: str, target: object) -> None:
    assert parse_election_url(url) == target


def test_the_etcd_leader_key_sits_under_the_prefix() -> None:
    assert EtcdTarget(("h:1",), "/fw").leader_key == "/fw/leader"


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("127.0.0.1:2379/fw", "no scheme"),
        ("zookeeper://h:2181/fw", "unknown scheme"),
        ("etcd:///fw", "names no host"),
        ("etcd://h/fw", "is not host:port"),
        ("etcd://h:0/fw", "out of range"),
        ("etcd://h:99999/fw", "out of range"),
        ("etcd://h:2379", "no key prefix"),
        ("etcd://h:2379/", "no key prefix"),
        ("etcd://user@h:2379/fw", "no user"),
        ("etcd://h:2379/fw?x=1", "no user, query"),
        ("etcd://h:2379,/fw", "is not host:port"),
        ("kubernetes://", "is not a Lease name"),
        ("kubernetes://Leader", "is not a Lease name"),
        ("kubernetes://a/b/c", "[namespace/]lease-name"),
        ("kubernetes://Bad_NS/lease", "is not a namespace"),
    ],
)
def test_bad_urls_are_refused_saying_why(url: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint.replace("[", r"\[").replace("?", r"\?")):
        parse_election_url(url)


def test_unset_timings_follow_the_lease_as_in_client_go() -> None:
    timing = LeaseTiming.from_lease(15.0)
    assert timing.renew_deadline == pytest.approx(10.0)
    assert timing.retry_period == pytest.approx(3.0)
    assert LeaseTiming() == LeaseTiming.from_lease(5.0)


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "complaint"),
    [
        (0.0, None, None, "lease duration must be positive"),
        (5.0, 5.0, None, "shorter than the lease duration"),
        (5.0, 0.0, None, "renew deadline"),
        (5.0, 3.0, 2.5, "retry period"),
        (5.0, 3.0, 0.0, "retry period"),
    ],
)
def test_inconsistent_timings_are_refused(
    lease: float, renew: float | None, retry: float | None, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        LeaseTiming.from_lease(lease, renew, retry)


async def test_an_etcd_url_builds_an_etcd_elector_without_contacting_it() -> None:
    elector = elector_from_url("etcd://127.0.0.1:1/fw", "cp-0", ("a:5555",), lease_duration=3)
    assert isinstance(elector, EtcdElector)
    assert elector.timing == LeaseTiming.from_lease(3)
    assert elector.leading() is None
    await elector.close()


def test_a_kubernetes_url_outside_a_pod_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ValueError, match="run in a pod"):
        elector_from_url("kubernetes://lease", "cp-0")


def test_a_candidate_needs_an_id() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        elector_from_url("etcd://127.0.0.1:1/fw", "")
