"""Tests for trialkit.metrics: exact estimators, intervals, flakiness and percentiles."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialkit.metrics import (
    flakiness_rate,
    is_flaky,
    latency_summary,
    mean_pass_at_k,
    mean_pass_hat_k,
    pass_at_k,
    pass_at_k_table,
    pass_hat_k,
    pass_hat_k_table,
    percentile,
    rate,
    supported_ks,
    wilson_interval,
)

Z95 = 1.959963984540054


@st.composite
def n_c_k(draw: st.DrawFn, max_n: int = 40) -> tuple[int, int, int]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    c = draw(st.integers(min_value=0, max_value=n))
    k = draw(st.integers(min_value=1, max_value=n))
    return n, c, k


def brute_force(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    trials = [True] * c + [False] * (n - c)
    draws = list(itertools.combinations(trials, k))
    any_pass = sum(1 for draw in draws if any(draw))
    all_pass = sum(1 for draw in draws if all(draw))
    return Fraction(any_pass, len(draws)), Fraction(all_pass, len(draws))


# --- pass@k and pass^k ---------------------------------------------------------------------


def test_exact_against_brute_force_enumeration() -> None:
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected_at, expected_hat = brute_force(n, c, k)
                assert pass_at_k(n, c, k) == expected_at, (n, c, k)
                assert pass_hat_k(n, c, k) == expected_hat, (n, c, k)


def test_known_values() -> None:
    assert pass_at_k(10, 3, 1) == Fraction(3, 10)
    assert pass_at_k(10, 3, 2) == 1 - Fraction(21, 45)
    assert pass_hat_k(10, 3, 2) == Fraction(3, 45)
    assert pass_hat_k(5, 5, 5) == 1
    assert pass_at_k(5, 0, 5) == 0


def test_exactly_one_when_too_few_failures() -> None:
    assert pass_at_k(5, 3, 3) == 1
    assert pass_at_k(5, 3, 4) == 1
    assert pass_at_k(5, 5, 1) == 1
    assert pass_at_k(5, 2, 3) == Fraction(9, 10)


@settings(max_examples=200)
@given(n_c_k())
def test_values_in_unit_interval_and_hat_below_at(args: tuple[int, int, int]) -> None:
    n, c, k = args
    at, hat = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    assert 0 <= at <= 1
    assert 0 <= hat <= 1
    assert hat <= at


@settings(max_examples=200)
@given(n_c_k())
def test_k_equal_one_is_the_pass_rate(args: tuple[int, int, int]) -> None:
    n, c, _ = args
    assert pass_at_k(n, c, 1) == Fraction(c, n)
    assert pass_hat_k(n, c, 1) == Fraction(c, n)


@settings(max_examples=200)
@given(n_c_k())
def test_monotone_in_c(args: tuple[int, int, int]) -> None:
    n, c, k = args
    if c < n:
        assert pass_at_k(n, c, k) <= pass_at_k(n, c + 1, k)
        assert pass_hat_k(n, c, k) <= pass_hat_k(n, c + 1, k)


@settings(max_examples=200)
@given(n_c_k())
def test_monotone_in_k(args: tuple[int, int, int]) -> None:
    n, c, k = args
    if k < n:
        assert pass_at_k(n, c, k) <= pass_at_k(n, c, k + 1)
        assert pass_hat_k(n, c, k) >= pass_hat_k(n, c, k + 1)


def test_large_n_does_not_overflow() -> None:
    at = pass_at_k(2000, 1000, 500)
    hat = pass_hat_k(2000, 1000, 500)
    assert 0 <= float(at) <= 1
    assert 0 <= float(hat) <= 1
    assert float(at) == 1.0
    assert 0 < hat < Fraction(1, 2**400)
    mean = mean_pass_at_k([(2000, 1000), (2000, 3)], 500)
    assert mean is not None
    assert 0 <= mean <= 1
    assert math.isfinite(mean)


@pytest.mark.parametrize("fn", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize(
    ("n", "c", "k", "match"),
    [
        (3, 1, 5, r"k=5 exceeds the 3 trials of this task; pass[@^]k needs k <= n"),
        (3, 1, 0, r"k=0 .*k >= 1"),
        (3, 1, -2, r"k=-2 .*k >= 1"),
        (3, 4, 1, r"c=4 .*n=3.*0 <= c <= n"),
        (3, -1, 1, r"c=-1 .*0 <= c <= n"),
        (0, 0, 1, r"n=0 .*n >= 1"),
    ],
)
def test_rejects_invalid_inputs(
    fn: Callable[[int, int, int], Fraction], n: int, c: int, k: int, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        fn(n, c, k)


def test_error_names_the_metric() -> None:
    with pytest.raises(ValueError, match=r"pass@k"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match=r"pass\^k"):
        pass_hat_k(2, 1, 3)


# --- aggregation over tasks ------------------------------------------------------------------


def test_means_over_tasks() -> None:
    counts = [(4, 1), (4, 4), (5, 0)]
    assert mean_pass_at_k(counts, 1) == pytest.approx((0.25 + 1 + 0) / 3)
    assert mean_pass_at_k(counts, 2) == pytest.approx((0.5 + 1 + 0) / 3)
    assert mean_pass_hat_k(counts, 2) == pytest.approx((0 + 1 + 0) / 3)
    assert mean_pass_at_k([], 1) is None
    assert mean_pass_hat_k([], 3) is None


def test_means_reject_tasks_with_too_few_trials() -> None:
    with pytest.raises(ValueError, match=r"task #1 \(n=2, c=1\).*k=3 exceeds the 2 trials"):
        mean_pass_at_k([(5, 2), (2, 1)], 3)
    with pytest.raises(ValueError, match=r"task #0"):
        mean_pass_hat_k([(2, 2)], 3)


def test_supported_ks_and_tables() -> None:
    assert supported_ks([]) == []
    assert supported_ks([(5, 2), (3, 3), (4, 0)]) == [1, 2, 3]
    assert supported_ks([(1, 0)]) == [1]
    assert pass_at_k_table([]) == {}
    assert pass_hat_k_table([]) == {}

    counts = [(3, 1), (4, 2)]
    at_table = pass_at_k_table(counts)
    hat_table = pass_hat_k_table(counts)
    assert list(at_table) == [1, 2, 3]
    assert list(hat_table) == [1, 2, 3]
    assert at_table[1] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert at_table[3] == pytest.approx((1 + 1) / 2)
    assert hat_table[2] == pytest.approx((0 + 1 / 6) / 2)
    assert hat_table[3] == pytest.approx(0.0)
    assert all(isinstance(v, float) for v in [*at_table.values(), *hat_table.values()])


# --- rates and Wilson intervals --------------------------------------------------------------


def wilson_closed_form(s: int, n: int, z: float) -> tuple[float, float]:
    root = z * math.sqrt(z * z + 4 * s * (n - s) / n)
    return (
        max(0.0, (2 * s + z * z - root) / (2 * (n + z * z))),
        min(1.0, (2 * s + z * z + root) / (2 * (n + z * z))),
    )


def test_rate() -> None:
    assert rate(0, 0) is None
    assert rate(0, 4) == 0.0
    assert rate(3, 4) == 0.75
    with pytest.raises(ValueError, match="successes=5"):
        rate(5, 4)
    with pytest.raises(ValueError, match="n=-1"):
        rate(0, -1)


def test_wilson_published_values() -> None:
    interval = wilson_interval(8, 10)
    assert interval is not None
    assert interval == pytest.approx((0.4902, 0.9433), abs=1e-4)
    interval = wilson_interval(0, 10)
    assert interval is not None
    assert interval[0] == 0.0
    assert interval[1] == pytest.approx(0.2775, abs=1e-4)
    interval = wilson_interval(10, 10)
    assert interval is not None
    assert interval[1] == 1.0
    assert interval[0] == pytest.approx(0.7225, abs=1e-4)


def test_wilson_other_confidence_levels() -> None:
    z99 = statistics.NormalDist().inv_cdf(0.995)
    assert wilson_interval(3, 7, 0.99) == pytest.approx(wilson_closed_form(3, 7, z99), abs=1e-12)
    narrow = wilson_interval(3, 7, 0.80)
    wide = wilson_interval(3, 7, 0.99)
    assert narrow is not None
    assert wide is not None
    assert wide[0] < narrow[0] < narrow[1] < wide[1]


def test_wilson_none_and_validation() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="successes=11"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="successes=-1"):
        wilson_interval(-1, 10)
    with pytest.raises(ValueError, match=r"confidence=1\.5"):
        wilson_interval(1, 10, 1.5)
    with pytest.raises(ValueError, match="confidence=0"):
        wilson_interval(1, 10, 0)


@settings(max_examples=200)
@given(
    st.integers(min_value=1, max_value=500).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n))
    )
)
def test_wilson_matches_closed_form_and_contains_estimate(args: tuple[int, int]) -> None:
    n, s = args
    interval = wilson_interval(s, n)
    assert interval is not None
    lower, upper = interval
    assert 0.0 <= lower <= s / n <= upper <= 1.0
    assert interval == pytest.approx(wilson_closed_form(s, n, Z95), abs=1e-12)


def test_wilson_width_shrinks_with_n() -> None:
    widths = []
    for n in [10, 20, 40, 80, 160, 320, 640]:
        interval = wilson_interval(n // 2, n)
        assert interval is not None
        widths.append(interval[1] - interval[0])
    assert all(a > b for a, b in itertools.pairwise(widths))


# --- flakiness -------------------------------------------------------------------------------


def test_is_flaky() -> None:
    assert is_flaky([True, False])
    assert is_flaky([False, False, True])
    assert not is_flaky([True, True, True])
    assert not is_flaky([False, False])
    assert not is_flaky([True])
    assert not is_flaky([])


def test_flakiness_rate() -> None:
    assert flakiness_rate([]) is None
    assert flakiness_rate([[True], [False], []]) is None
    assert flakiness_rate([[True, False], [True, True]]) == 0.5
    assert flakiness_rate([[True, False], [True, True], [False], [True]]) == 0.5
    assert flakiness_rate([[True, False, True], [False, True], [False, False]]) == pytest.approx(
        2 / 3
    )
    assert flakiness_rate([[False, False], [True, True]]) == 0.0


# --- percentiles and latency -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([15.0, 20.0, 35.0, 40.0, 50.0], 40, 29.0),
        ([float(i) for i in range(1, 11)], 95, 9.55),
        ([3.0, 1.0, 2.0], 25, 1.5),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 0, 0.5),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 10, 1.0),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 33, 1.825),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 50, 3.0),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 90, 8.625),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 99, 9.8625),
        ([0.5, 7.25, 1.5, 2.0, 10.0, 4.0], 100, 10.0),
        ([42.0], 95, 42.0),
    ],
)
def test_percentile_known_numpy_values(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected, abs=1e-12)


@settings(max_examples=100)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=2, max_size=30))
def test_percentile_matches_statistics_inclusive(values: list[float]) -> None:
    expected = statistics.quantiles(values, n=100, method="inclusive")
    for q in range(1, 100):
        assert percentile(values, q) == pytest.approx(expected[q - 1], rel=1e-9, abs=1e-6)
    assert percentile(values, 0) == min(values)
    assert percentile(values, 100) == max(values)


def test_percentile_empty_and_invalid_q() -> None:
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match="q=101"):
        percentile([1.0], 101)
    with pytest.raises(ValueError, match="q=-1"):
        percentile([1.0], -1)
    with pytest.raises(ValueError, match="q=nan"):
        percentile([1.0], float("nan"))


def test_latency_summary() -> None:
    summary = latency_summary([0.5, 7.25, 1.5, 2.0, 10.0, 4.0])
    assert set(summary) == {"p50", "p95", "mean", "max"}
    assert summary["p50"] == pytest.approx(3.0)
    assert summary["p95"] == pytest.approx(9.3125)
    assert summary["mean"] == pytest.approx(25.25 / 6)
    assert summary["max"] == 10.0
    assert latency_summary([]) == {"p50": None, "p95": None, "mean": None, "max": None}
