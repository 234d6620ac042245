"""The plain-numbers histogram behind every ``*_seconds`` metric: ``le`` buckets (bounds
inclusive), a running count and sum, and cumulative counts ending with +Inf."""

from __future__ import annotations

import math

import pytest

from fastworker_common.histogram import DURATION_BUCKETS, Histogram

INF = float("inf")


def test_the_duration_buckets_are_sorted_and_reach_fifteen_minutes() -> None:
    assert list(DURATION_BUCKETS) == sorted(set(DURATION_BUCKETS))
    assert DURATION_BUCKETS[0] == 0.005
    assert {30.0, 60.0, 300.0, 900.0} <= set(DURATION_BUCKETS)
    assert DURATION_BUCKETS[-1] == 900.0


def test_a_new_histogram_is_empty_with_one_bucket_per_bound_plus_infinity() -> None:
    histogram = Histogram()

    assert (histogram.count, histogram.sum) == (0, 0.0)
    assert histogram.bounds == DURATION_BUCKETS
    assert histogram.counts == [0] * (len(DURATION_BUCKETS) + 1)
    assert histogram.cumulative() == [(b, 0) for b in (*DURATION_BUCKETS, INF)]


@pytest.mark.parametrize("bound", DURATION_BUCKETS)
def test_a_value_on_a_bucket_bound_counts_in_that_bucket(bound: float) -> None:
    histogram = Histogram()

    histogram.observe(bound)

    index = DURATION_BUCKETS.index(bound)
    assert histogram.counts[index] == 1
    assert sum(histogram.counts) == 1


def test_a_value_just_above_a_bound_counts_in_the_next_bucket() -> None:
    histogram = Histogram((1.0, 2.0))

    histogram.observe(1.0)
    histogram.observe(math.nextafter(1.0, INF))

    assert histogram.counts == [1, 1, 0]


def test_zero_counts_in_the_first_bucket() -> None:
    histogram = Histogram()

    histogram.observe(0.0)

    assert histogram.counts[0] == 1
    assert histogram.cumulative()[0] == (0.005, 1)


def test_a_value_beyond_the_last_bound_counts_only_in_the_infinity_bucket() -> None:
    histogram = Histogram()

    histogram.observe(900.0001)
    histogram.observe(86_400.0)

    assert histogram.counts[-1] == 2
    assert histogram.cumulative()[-2] == (900.0, 0)
    assert histogram.cumulative()[-1] == (INF, 2)


def test_count_and_sum_add_up_every_observation() -> None:
    histogram = Histogram()

    for value in (0.001, 0.3, 2.0, 45.0, 1000.0):
        histogram.observe(value)

    assert histogram.count == 5
    assert histogram.sum == pytest.approx(1047.301)


def test_the_cumulative_counts_never_decrease_and_end_at_the_count() -> None:
    histogram = Histogram((0.1, 1.0, 10.0))

    for value in (0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 50.0):
        histogram.observe(value)

    assert histogram.cumulative() == [(0.1, 2), (1.0, 4), (10.0, 6), (INF, 7)]
    assert histogram.counts == [2, 2, 2, 1]


def test_custom_bounds_are_kept_and_used() -> None:
    histogram = Histogram((1.0,))

    histogram.observe(0.5)
    histogram.observe(3.0)

    assert histogram.bounds == (1.0,)
    assert histogram.cumulative() == [(1.0, 1), (INF, 2)]


def test_a_histogram_without_bounds_has_only_the_infinity_bucket() -> None:
    histogram = Histogram(())

    histogram.observe(7.0)

    assert histogram.cumulative() == [(INF, 1)]


def test_histograms_do_not_share_their_counts() -> None:
    first, second = Histogram(), Histogram()

    first.observe(1.0)

    assert second.count == 0
    assert sum(second.counts) == 0
