"""The interval bench_result_writes reports its median cost with."""

from __future__ import annotations

import statistics

from bench.bench_result_writes import median_interval, verdict


def test_interval_holds_the_median_and_lies_within_the_values() -> None:
    costs = [-5.5, 0.2, 3.1, 4.8, 5.2, 6.0, 7.7, 9.9, 14.5, 15.5]
    low, high = median_interval(costs)
    assert min(costs) <= low <= statistics.median(costs) <= high <= max(costs)


def test_more_pairs_of_the_same_spread_narrow_the_interval() -> None:
    few = [1.0, 9.0, 3.0, 7.0, 5.0]
    low_few, high_few = median_interval(few)
    low_many, high_many = median_interval(few * 8)
    assert high_many - low_many < high_few - low_few


def test_the_same_pairs_give_the_same_interval() -> None:
    costs = [2.0, 8.0, 4.0, 6.0, 11.0, -1.0]
    assert median_interval(costs) == median_interval(list(costs))


def test_one_pair_is_its_own_interval() -> None:
    assert median_interval([4.2]) == (4.2, 4.2)


def test_verdict_only_where_the_interval_clears_the_target() -> None:
    assert verdict((1.0, 4.9), 5.0) == "met"
    assert verdict((5.1, 9.0), 5.0) == "missed"
    assert verdict((3.0, 7.0), 5.0).startswith("not told apart")
