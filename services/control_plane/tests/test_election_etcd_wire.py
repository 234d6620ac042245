"""etcd's v3 JSON gateway as the etcd elector writes and reads it (no server needed)."""

from __future__ import annotations

import json

import pytest

from fastworker_control_plane.election import CoordinatorRefused, CoordinatorRejected, Term
from fastworker_control_plane.election import _etcd_wire as wire
from fastworker_control_plane.election._etcd_http import _decode
from fastworker_control_plane.election.terms import Tenure

KEY = "/fw/leader"


def test_a_campaign_creates_the_key_only_if_it_was_never_created() -> None:
    value = wire.candidate_value("cp-0", ("10.0.0.5:5555",))
    body = wire.campaign_request(KEY, value, 42)
    assert body["compare"] == [
        {"key": wire.b64(KEY), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
    ]
    put = body["success"][0]["request_put"]
    assert (wire.unb64(put["value"]), put["lease"]) == (value, "42")
    assert json.loads(value) == {"id": "cp-0", "addresses": ["10.0.0.5:5555"]}


def test_a_won_campaign_takes_its_epoch_from_the_put_revision() -> None:
    value = wire.candidate_value("cp-0", ())
    result = wire.campaign_result(
        {"header": {"revision": "17"}, "succeeded": True, "responses": [{"response_put": {}}]},
        value,
        9,
    )
    assert result.won
    assert result.holder is not None
    assert wire.term_of(result.holder) == Term("cp-0", 17, ())


def test_a_lost_campaign_reports_the_holder() -> None:
    value = wire.candidate_value("cp-1", ("b:1",))
    held = {
        "key": wire.b64(KEY),
        "create_revision": "5",
        "mod_revision": "5",
        "value": wire.b64(value),
        "lease": "77",
    }
    response = {
        "header": {"revision": "9"},
        "responses": [{"response_range": {"header": {"revision": "9"}, "kvs": [held]}}],
    }
    result = wire.campaign_result(response, b"ignored", 1)
    assert not result.won
    assert result.revision == 9
    assert result.holder is not None
    assert wire.term_of(result.holder) == Term("cp-1", 5, ("b:1",))


def test_resigning_deletes_only_the_key_of_our_own_term() -> None:
    body = wire.resign_request(KEY, 17)
    assert body["compare"][0]["create_revision"] == "17"
    assert body["success"] == [{"request_delete_range": {"key": wire.b64(KEY)}}]


def test_a_keepalive_without_ttl_means_the_lease_had_expired() -> None:
    assert wire.keepalive_ttl({"result": {"ID": "5", "TTL": "5"}}) == 5
    assert wire.keepalive_ttl({"result": {"ID": "5"}}) == 0


def test_an_absent_key_reads_as_none_with_the_store_revision() -> None:
    assert wire.range_result({"header": {"revision": "3"}}) == (None, 3)


def test_a_leader_value_that_is_not_ours_still_names_a_term() -> None:
    kv = wire.KeyValue(b"someone-else", 4, 0)
    assert wire.term_of(kv) == Term("someone-else", 4, ())


def test_watch_messages_tell_deletion_and_creation() -> None:
    created = {"create_revision": "8", "value": wire.b64(wire.candidate_value("x", ()))}
    deleted = wire.watch_update(
        {"result": {"header": {"revision": "9"}, "events": [{"type": "DELETE", "kv": {}}]}}
    )
    assert deleted.deleted
    put = wire.watch_update({"result": {"header": {"revision": "8"}, "events": [{"kv": created}]}})
    assert not put.deleted
    assert put.created is not None
    assert put.created.create_revision == 8
    assert wire.watch_update({"result": {"created": True}}) == wire.WatchUpdate(
        False, None, 0, False
    )
    assert wire.watch_update({"result": {"canceled": True}}).canceled


def test_a_tenure_ends_at_the_renew_deadline_of_its_latest_renewal() -> None:
    tenure = Tenure.begin(Term("a", 1), sent_at=10.0, renew_deadline=3.0)
    assert tenure.valid(12.999)
    assert not tenure.valid(13.0)
    tenure.renewed(11.0)
    assert tenure.valid(13.999)
    tenure.renewed(10.5)  # a late answer to an older request never shortens it
    assert tenure.valid_until == 14.0


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # etcd 3.4 with its auth on, asked without credentials (seen from Debian's etcd)
        (400, {"error": "etcdserver: user name is empty", "code": 3}),
        (401, {"error": "etcdserver: invalid auth token", "code": 16}),
        (403, {"error": "etcdserver: permission denied", "code": 7}),
    ],
)
def test_an_answer_refusing_our_credentials_is_told_apart_from_other_errors(
    status: int, body: dict[str, object]
) -> None:
    with pytest.raises(CoordinatorRefused):
        _decode(json.dumps(body), status)
    with pytest.raises(CoordinatorRejected) as other:
        _decode(json.dumps({"error": "etcdserver: requested lease not found", "code": 5}), 404)
    assert not isinstance(other.value, CoordinatorRefused)
