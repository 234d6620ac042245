"""Tasks held when the last control plane was lost, in doubt until their subworker says
whether it still holds them, or the grace ends."""

from __future__ import annotations

from fastworker_control_plane.core.handover import Handover

NOW = 100.0


def test_a_worker_keeps_what_it_says_it_holds_and_the_rest_goes_back_at_once() -> None:
    handover = Handover(grace=3.0)
    for task_id in ("a", "b", "c"):
        handover.hold("w", task_id, NOW)
    handover.hold("v", "d", NOW)
    assert handover.claim("w", {"a", "c", "unknown"}) == (["a", "c"], ["b"])
    assert len(handover) == 1  # only "d" is still in doubt
    assert handover.claim("w", {"a"}) == ([], [])  # claimed once only


def test_what_no_worker_claims_goes_back_when_the_grace_ends_and_only_then() -> None:
    handover = Handover(grace=3.0)
    handover.hold("w", "a", NOW)
    handover.hold("v", "b", NOW + 1)  # the grace counts from the takeover
    assert handover.expired(NOW + 2.9) == []
    assert sorted(handover.expired(NOW + 3.0)) == [("v", "b"), ("w", "a")]
    assert handover.expired(NOW + 10) == []
    assert len(handover) == 0
