"""The result cache: LRU by entries and by bytes, TTL by the injected clock (every call
passes ``now``)."""

from __future__ import annotations

import pytest

from fastworker_control_plane.core.result_cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SIZE,
    DEFAULT_TTL,
    CacheStats,
    ResultCache,
)

T0 = 1000.0


def cache(max_size: int = 3, ttl: float = 10.0, max_bytes: int = 1000) -> ResultCache[str]:
    return ResultCache(max_size=max_size, ttl=ttl, max_bytes=max_bytes)


def test_the_defaults_are_ten_thousand_entries_and_256_mib_for_one_hour() -> None:
    c: ResultCache[str] = ResultCache()

    assert (c.max_size, c.max_bytes, c.ttl) == (DEFAULT_MAX_SIZE, DEFAULT_MAX_BYTES, DEFAULT_TTL)
    assert (c.max_size, c.max_bytes, c.ttl) == (10_000, 64 * 1024 * 1024, 3600.0)


@pytest.mark.parametrize(("max_size", "ttl"), [(0, 10.0), (-1, 10.0), (3, 0.0), (3, -5.0)])
def test_a_cache_without_room_or_without_lifetime_is_refused(max_size: int, ttl: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        ResultCache[str](max_size=max_size, ttl=ttl)


def test_a_cache_without_room_for_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        ResultCache[str](max_bytes=0)


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="size must be >= 0"):
        cache().put("a", "A", now=T0, size=-1)


def test_a_stored_value_is_returned_until_just_before_its_ttl() -> None:
    c = cache(ttl=10.0)
    c.put("a", "A", now=T0)

    assert c.get("a", now=T0) == "A"
    assert c.get("a", now=T0 + 9.999) == "A"


def test_a_value_expires_exactly_at_its_ttl() -> None:
    c = cache(ttl=10.0)
    c.put("a", "A", now=T0)

    assert c.get("a", now=T0 + 10.0) is None
    assert "a" not in c
    assert c.stats == CacheStats(hits=0, misses=1, evictions=0, expirations=1)


def test_an_unknown_key_is_a_miss() -> None:
    c = cache()

    assert c.get("nope", now=T0) is None
    assert c.stats == CacheStats(misses=1)


def test_the_least_recently_used_entry_is_evicted_when_full() -> None:
    c = cache(max_size=3)
    for key in "abc":
        c.put(key, key.upper(), now=T0)

    c.put("d", "D", now=T0 + 1)

    assert "a" not in c
    assert [k for k in "bcd" if k in c] == ["b", "c", "d"]
    assert len(c) == 3
    assert c.stats.evictions == 1


def test_eviction_follows_insertion_order_when_nothing_is_read() -> None:
    c = cache(max_size=2)
    for i, key in enumerate("abcde"):
        c.put(key, key, now=T0 + i)

    assert c.values(now=T0 + 5) == ["d", "e"]
    assert c.stats.evictions == 3


def test_reading_an_entry_protects_it_from_the_next_eviction() -> None:
    c = cache(max_size=3)
    for key in "abc":
        c.put(key, key.upper(), now=T0)

    assert c.get("a", now=T0 + 1) == "A"
    c.put("d", "D", now=T0 + 2)

    assert "a" in c
    assert "b" not in c


def test_reading_an_entry_does_not_extend_its_expiry() -> None:
    c = cache(ttl=10.0)
    c.put("a", "A", now=T0)

    assert c.get("a", now=T0 + 9.0) == "A"

    assert c.get("a", now=T0 + 10.0) is None


def test_storing_a_key_again_restarts_its_ttl_and_makes_it_most_recent() -> None:
    c = cache(max_size=2, ttl=10.0)
    c.put("a", "old", now=T0)
    c.put("b", "B", now=T0)

    c.put("a", "new", now=T0 + 5)
    c.put("c", "C", now=T0 + 6)

    assert "b" not in c
    assert c.get("a", now=T0 + 14.0) == "new"
    assert c.stats.evictions == 1


def test_peek_reads_without_counting_or_reordering() -> None:
    c = cache(max_size=2)
    c.put("a", "A", now=T0)
    c.put("b", "B", now=T0)

    assert c.peek("a", now=T0 + 1) == "A"
    assert c.peek("zzz", now=T0 + 1) is None
    c.put("c", "C", now=T0 + 2)

    assert "a" not in c  # peek did not make "a" recent
    assert c.stats == CacheStats(evictions=1)


def test_peek_does_not_return_or_remove_an_expired_entry() -> None:
    c = cache(ttl=10.0)
    c.put("a", "A", now=T0)

    assert c.peek("a", now=T0 + 10.0) is None
    assert "a" in c  # left for get() or sweep() to reclaim
    assert c.stats == CacheStats()


def test_values_lists_live_entries_most_recent_last() -> None:
    c = cache(max_size=5, ttl=10.0)
    c.put("a", "A", now=T0)
    c.put("b", "B", now=T0 + 5)
    c.put("c", "C", now=T0 + 6)
    c.get("b", now=T0 + 7)

    assert c.values(now=T0 + 7) == ["A", "C", "B"]
    assert c.values(now=T0 + 10) == ["C", "B"]


def test_sweep_removes_only_expired_entries_and_counts_them() -> None:
    c = cache(max_size=5, ttl=10.0)
    c.put("a", "A", now=T0)
    c.put("b", "B", now=T0 + 1)
    c.put("c", "C", now=T0 + 5)

    removed = c.sweep(now=T0 + 11.0)

    assert removed == 2
    assert len(c) == 1
    assert c.get("c", now=T0 + 11.0) == "C"
    assert c.stats == CacheStats(hits=1, misses=0, evictions=0, expirations=2)


def test_sweep_with_nothing_expired_changes_nothing() -> None:
    c = cache(ttl=10.0)
    c.put("a", "A", now=T0)

    assert c.sweep(now=T0 + 1) == 0
    assert len(c) == 1
    assert c.stats == CacheStats()


def test_stats_count_hits_misses_evictions_and_expirations_together() -> None:
    c = cache(max_size=2, ttl=10.0)
    c.put("a", "A", now=T0)
    c.put("b", "B", now=T0 + 5)
    c.get("a", now=T0 + 1)  # hit
    c.get("x", now=T0 + 1)  # miss
    c.put("c", "C", now=T0 + 6)  # evicts "b" (a was read more recently)
    c.get("a", now=T0 + 10)  # expired: miss + expiration

    assert c.stats == CacheStats(hits=1, misses=2, evictions=1, expirations=1)
    assert len(c) == 1


def test_the_least_recently_used_entries_go_when_the_bytes_pass_their_bound() -> None:
    c = cache(max_size=10, max_bytes=100)
    for key in "abc":
        c.put(key, key.upper(), now=T0, size=40)  # 120 bytes: "a" must go

    assert [k for k in "abc" if k in c] == ["b", "c"]
    assert c.bytes == 80
    assert c.stats.evictions == 1


def test_a_large_entry_pushes_out_as_many_old_ones_as_it_needs() -> None:
    c = cache(max_size=10, max_bytes=100)
    for key in "abcd":
        c.put(key, key, now=T0, size=25)
    c.get("a", now=T0)  # read: now the most recently used of the four

    c.put("e", "E", now=T0 + 1, size=70)

    assert [k for k in "abcde" if k in c] == ["a", "e"]
    assert c.bytes == 95
    assert c.stats.evictions == 3


def test_an_entry_larger_than_the_bound_alone_is_kept_alone_until_the_next_put() -> None:
    c = cache(max_size=10, max_bytes=100)
    c.put("a", "A", now=T0, size=10)

    c.put("huge", "H", now=T0, size=500)

    assert c.get("huge", now=T0) == "H"  # just stored: readable at least once
    assert "a" not in c
    c.put("b", "B", now=T0, size=10)
    assert "huge" not in c
    assert c.bytes == 10


def test_the_byte_count_follows_replacements_expirations_and_sweeps() -> None:
    c = cache(max_size=10, ttl=10.0, max_bytes=1000)
    c.put("a", "A", now=T0, size=100)
    c.put("a", "A2", now=T0, size=30)  # replaced: only the new size counts
    c.put("b", "B", now=T0 + 5, size=50)
    c.put("c", "C", now=T0 + 6, size=7)
    assert c.bytes == 87

    assert c.get("a", now=T0 + 10) is None  # expired on read
    assert c.bytes == 57
    assert c.sweep(now=T0 + 15.5) == 1  # "b"
    assert c.bytes == 7
    assert c.sweep(now=T0 + 100) == 1
    assert (c.bytes, len(c)) == (0, 0)


def test_entries_without_a_size_are_bounded_by_count_only() -> None:
    c = cache(max_size=2, max_bytes=1)
    for key in "abc":
        c.put(key, key, now=T0)

    assert c.values(now=T0) == ["b", "c"]
    assert c.bytes == 0


def test_an_entry_put_with_its_own_ttl_expires_then_and_is_swept_then() -> None:
    c = cache(ttl=10.0)
    c.put("short", "s", T0, ttl=2.0)
    c.put("long", "l", T0, ttl=60.0)
    c.put("plain", "p", T0)

    assert [c.peek(k, T0 + 2) for k in ("short", "long", "plain")] == [None, "l", "p"]
    assert c.sweep(T0 + 10) == 2
    assert c.get("long", T0 + 59.9) == "l"
    assert c.get("long", T0 + 60) is None


def test_an_entry_put_with_a_ttl_of_zero_is_not_kept_and_drops_what_its_key_had() -> None:
    c = cache()
    c.put("k", "old", T0, size=10)

    c.put("k", "new", T0 + 1, size=10, ttl=0.0)

    assert c.peek("k", T0 + 1) is None
    assert (len(c), c.bytes) == (0, 0)
    with pytest.raises(ValueError, match="ttl"):
        c.put("k", "v", T0, ttl=-1.0)
