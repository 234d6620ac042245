"""The leader's tracker: lag, the in-sync set, which commits are replicated, and what
the leader may acknowledge when too few followers are in sync. Time is passed in."""

from __future__ import annotations

from fastworker_control_plane.replication.tracker import Lag, Mode, Tracker

LOG = b"L" * 16
NEW = b"N" * 16
T0 = 1000.0


def tracker(**options: object) -> Tracker:
    return Tracker(LOG, 10, T0, lag_bound=2.0, **options)  # type: ignore[arg-type]


def test_a_commit_is_released_once_an_in_sync_follower_acknowledges_it() -> None:
    # Given a follower in sync at the log's start, and two commits
    t = tracker()
    t.acked("a", LOG, 10, T0)
    first = t.committed(100, T0 + 0.1)
    second = t.committed(200, T0 + 0.2)
    assert t.releasable(T0 + 0.2) == 0
    # When the follower acknowledges the first one
    t.acked("a", LOG, 100, T0 + 0.3)
    # Then it (and not the second) may be acknowledged to clients
    assert t.mode(T0 + 0.3) is Mode.REPLICATED
    assert t.releasable(T0 + 0.3) == first
    t.acked("a", LOG, 200, T0 + 0.4)
    assert t.releasable(T0 + 0.4) == second


def test_with_two_sync_replicas_the_second_fastest_follower_sets_the_line() -> None:
    t = tracker(sync_replicas=2)
    for name in ("a", "b", "c"):
        t.acked(name, LOG, 10, T0)
    seqs = [t.committed(end, T0) for end in (100, 200, 300)]
    t.acked("a", LOG, 300, T0 + 0.1)
    t.acked("b", LOG, 200, T0 + 0.1)
    t.acked("c", LOG, 100, T0 + 0.1)
    assert t.releasable(T0 + 0.1) == seqs[1]


def test_lag_counts_commits_frames_bytes_and_the_age_of_the_oldest_missing_commit() -> None:
    t = tracker()
    t.acked("a", LOG, 10, T0)
    t.committed(100, T0 + 1.0, frames=3)
    t.committed(250, T0 + 1.5, frames=2)
    assert t.lag("a", T0 + 1.75) == Lag(commits=2, frames=5, bytes=240, seconds=0.75)
    t.acked("a", LOG, 100, T0 + 1.75)
    assert t.lag("a", T0 + 1.75) == Lag(commits=1, frames=2, bytes=150, seconds=0.25)
    t.acked("a", LOG, 250, T0 + 1.9)
    assert t.lag("a", T0 + 1.9) == Lag(0, 0, 0, 0.0)


def test_a_follower_whose_oldest_missing_commit_is_too_old_drops_out_so_the_leader_is_alone() -> (
    None
):
    # Given one follower in sync, and a commit it never acknowledges
    t = tracker()
    t.acked("a", LOG, 10, T0)
    seq = t.committed(100, T0 + 0.5)
    t.acked("a", LOG, 10, T0 + 2.0)  # heard from (it is alive), but still behind
    assert t.mode(T0 + 2.4) is Mode.REPLICATED
    assert t.releasable(T0 + 2.4) == 0
    # When the commit is older than the bound
    assert t.check(T0 + 2.6) == [("a", False)]
    # Then the follower is out, and the leader acknowledges on its own fsync
    assert t.in_sync == []
    assert t.mode(T0 + 2.6) is Mode.ALONE
    assert t.releasable(T0 + 2.6) == seq


def test_require_sync_with_too_few_in_sync_refuses_writes_and_releases_only_replicated() -> None:
    t = tracker(require_sync=True)
    t.acked("a", LOG, 10, T0)
    first = t.committed(100, T0)
    t.committed(200, T0)
    t.acked("a", LOG, 100, T0 + 0.1)
    # When the follower falls behind past the bound
    assert t.mode(T0 + 3.0) is Mode.REFUSING
    assert not t.accepts_writes(T0 + 3.0)
    # Then only the commit it holds is released, never the other
    assert t.releasable(T0 + 3.0) == first


def test_a_silent_follower_drops_out_even_with_nothing_to_acknowledge() -> None:
    t = tracker()
    t.acked("a", LOG, 10, T0)
    assert t.in_sync == ["a"]
    t.check(T0 + 2.1)
    assert t.in_sync == []


def test_a_catching_up_follower_joins_once_its_oldest_missing_commit_is_recent() -> None:
    t = tracker()
    t.committed(100, T0)
    t.committed(200, T0 + 5.0)
    t.acked("a", LOG, 10, T0 + 5.1)  # behind a commit 5.1 s old
    assert t.in_sync == []
    t.acked("a", LOG, 100, T0 + 5.2)  # its oldest missing one is 0.2 s old
    assert t.in_sync == ["a"]


def test_a_follower_that_never_acknowledged_the_leaders_log_is_not_in_sync() -> None:
    t = tracker()
    t.acked("a", b"something else", 10, T0)
    assert t.in_sync == []
    assert t.mode(T0) is Mode.ALONE


def test_a_rewrite_gives_in_sync_followers_the_bound_to_install_the_new_log() -> None:
    # Given a follower that has acknowledged everything, then the leader compacts
    t = tracker()
    t.acked("a", LOG, 10, T0)
    before = t.committed(100, T0)
    t.acked("a", LOG, 100, T0 + 0.1)
    t.rewritten(NEW, 60, T0 + 0.2)
    after = t.committed(90, T0 + 0.3)
    # Then what it acknowledged stays replicated, and it stays in sync for the bound
    assert t.releasable(T0 + 0.3) == before
    assert t.in_sync == ["a"]
    # And acks of the old log count for nothing more
    t.acked("a", LOG, 100, T0 + 0.5)
    assert t.releasable(T0 + 0.5) == before
    # When it installs the new log and acknowledges the commit after it
    t.acked("a", NEW, 90, T0 + 1.0)
    assert t.releasable(T0 + 1.0) == after
    # Or, had it not, it would have dropped out after the bound
    t.check(T0 + 3.1)
    assert t.in_sync == []


def test_the_release_line_never_moves_back() -> None:
    t = tracker()
    t.acked("a", LOG, 10, T0)
    t.committed(100, T0)
    assert t.mode(T0 + 5) is Mode.ALONE
    alone = t.releasable(T0 + 5)
    t.acked("a", LOG, 10, T0 + 5)  # back, but behind
    assert t.releasable(T0 + 5) == alone


def test_forgotten_commits_do_not_grow_without_bound() -> None:
    t = tracker()
    t.acked("a", LOG, 10, T0)
    for end in range(100, 100_100, 100):
        t.committed(end, T0)
        t.acked("a", LOG, end, T0)
    assert len(t._commits) == 1  # only the last: it maps an ack of the end to its seq


def test_alone_with_two_sync_replicas_it_still_waits_for_the_follower_left_in_sync() -> None:
    # Given two sync replicas wanted, and only one follower in sync
    t = tracker(sync_replicas=2)
    t.acked("a", LOG, 10, T0)
    first = t.committed(100, T0 + 0.1)
    # Then the leader is alone, but a commit waits for the follower it still has
    assert t.mode(T0 + 0.1) is Mode.ALONE
    assert t.releasable(T0 + 0.1) == 0
    t.acked("a", LOG, 100, T0 + 0.2)
    assert t.releasable(T0 + 0.2) == first
    # And once that follower is silent past the lag bound, on the leader's disk alone
    second = t.committed(200, T0 + 0.3)
    assert t.releasable(T0 + 2.5) == second


def test_alone_without_the_mark_only_replicated_commits_are_released() -> None:
    # Given a leader not yet marked as acknowledging alone, with no follower in sync
    t = tracker(alone_permitted=False)
    t.acked("a", LOG, 10, T0)
    first = t.committed(100, T0 + 0.1)
    t.committed(200, T0 + 0.2)
    t.acked("a", LOG, 100, T0 + 0.3)
    # When the follower falls silent past the lag bound
    assert t.mode(T0 + 5) is Mode.ALONE
    # Then only what it has is released, until the mark allows the rest
    assert t.releasable(T0 + 5) == first
    t.alone_permitted = True
    assert t.releasable(T0 + 5) == t.seq


def test_the_mark_may_go_once_every_follower_has_what_was_acknowledged_alone() -> None:
    # Given commits acknowledged alone
    t = tracker()
    t.committed(100, T0)
    alone = t.committed(200, T0)
    assert t.releasable(T0) == alone
    assert not t.alone_covered(T0)  # no follower at all
    # When a follower acknowledges part of them, then all
    t.acked("a", LOG, 100, T0 + 0.1)
    assert not t.alone_covered(T0 + 0.1)
    t.acked("a", LOG, 200, T0 + 0.2)
    # Then the leader may stop being marked alone
    assert t.mode(T0 + 0.2) is Mode.REPLICATED
    assert t.alone_covered(T0 + 0.2)
