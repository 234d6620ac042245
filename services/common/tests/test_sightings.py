"""Which message a failed connection gets: "never reached" keeps the advice about
addresses, "was answering, then stopped" names the control plane and when it was last
seen. Pure rules: no sockets, times given."""

from __future__ import annotations

import pytest

from fastworker_common.errors import stopped_answering
from fastworker_common.sightings import Peer, Sightings, unreachable

NEVER = "a control plane announced itself at tcp://cp:5555 but it cannot be reached from here"
HERE = "tcp://127.0.0.1:5555"


def test_a_control_plane_never_reached_gets_the_advice_about_addresses() -> None:
    assert unreachable(NEVER, HERE, Sightings(), now=100.0) == NEVER


def test_a_control_plane_that_answered_before_stopped_answering() -> None:
    # Given a reply from HERE at t=88
    sightings = Sightings()
    sightings.answered(HERE, 88.0)
    # When it cannot be reached at t=100
    message = unreachable(NEVER, HERE, sightings, now=100.0)
    # Then it says so, with the address and how long ago it last answered
    assert message.startswith(f"the control plane at {HERE} stopped answering")
    assert "(last seen 12 s ago)" in message
    assert "stopped, restarted or crashed" in message
    assert "--address" not in message  # no network chase
    assert "\n" not in message


def test_only_the_latest_reply_counts() -> None:
    sightings = Sightings()
    sightings.answered(HERE, 10.0)
    sightings.answered(HERE, 97.5)
    assert "(last seen 2.5 s ago)" in unreachable(NEVER, HERE, sightings, now=100.0)


def test_a_reply_from_another_control_plane_says_nothing_of_this_one() -> None:
    sightings = Sightings()
    sightings.answered("tcp://127.0.0.1:6555", 99.0)
    assert unreachable(NEVER, HERE, sightings, now=100.0) == NEVER


def test_of_replicas_the_message_says_no_other_one_answered_either() -> None:
    sightings = Sightings()
    sightings.answered(HERE, 90.0)
    message = unreachable(NEVER, HERE, sightings, now=100.0, replicas=True)
    assert message.startswith(f"the control plane at {HERE} stopped answering")
    assert "(last seen 10 s ago)" in message
    assert "no other replica answered either" in message


def test_of_replicas_a_successor_never_reached_names_the_last_one_seen() -> None:
    # Given replies from A, then from B, and C (a successor) never reached
    a, b, c = "tcp://a:5555", "tcp://b:5555", "tcp://c:5555"
    sightings = Sightings()
    sightings.answered(a, 50.0)
    sightings.answered(b, 80.0)
    # When C cannot be reached at the deadline
    message = unreachable(NEVER, c, sightings, now=100.0, replicas=True)
    # Then B, the last that answered, is named
    assert message.startswith(f"the control plane at {b} stopped answering (last seen 20 s ago)")


def test_a_control_plane_alone_never_borrows_another_ones_sighting() -> None:
    sightings = Sightings()
    sightings.answered("tcp://b:5555", 80.0)
    assert unreachable(NEVER, "tcp://c:5555", sightings, now=100.0) == NEVER


def test_a_peer_records_replies_in_the_sightings_it_shares() -> None:
    # Given two lanes' peers of one control plane, sharing the client's sightings
    sightings = Sightings()
    critical, normal = Peer(HERE, sightings), Peer(HERE, sightings)
    # When only the normal lane got a reply, then the critical lane knows it answered
    normal.answered(40.0)
    assert "(last seen 20 s ago)" in critical.unreachable(NEVER, now=60.0)
    assert Peer(HERE).unreachable(NEVER, now=60.0) == NEVER  # sightings of its own


@pytest.mark.parametrize(
    ("ago", "shown"),
    [
        (0.0, "0.0 s"),
        (3.04, "3.0 s"),
        (12.4, "12 s"),
        (119.0, "119 s"),
        (600.0, "10 min"),
        (7200.0, "2 h"),
    ],
)
def test_how_long_ago_reads_at_its_scale(ago: float, shown: str) -> None:
    assert f"(last seen {shown} ago)" in stopped_answering(HERE, ago)


def test_a_time_before_the_last_reply_never_shows_a_negative_age() -> None:
    sightings = Sightings()
    sightings.answered(HERE, 100.0)
    assert "(last seen 0.0 s ago)" in unreachable(NEVER, HERE, sightings, now=99.0)
