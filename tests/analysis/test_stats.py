"""The statistics of `compare` and of the suite pass rate, checked against the reference
libraries (scipy, statsmodels) to 1e-9, and the coverage of the task-clustered interval by a
seeded simulation. The implementations are pure Python; only these tests import scipy."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]
from statsmodels.stats.contingency_tables import StratifiedTable  # type: ignore[import-untyped]
from statsmodels.stats.multitest import multipletests  # type: ignore[import-untyped]

from trialkit.analysis.planning import fewest_tasks, smallest_p
from trialkit.analysis.stats import (
    Table,
    cmh_statistic,
    fisher_exact,
    holm,
    paired_t,
    sign_flip_test,
    stratified_exact_test,
)
from trialkit.metrics import (
    student_t_cdf,
    student_t_quantile,
    t_interval,
    task_mean_interval,
    wilson_interval,
)

TOLERANCE = 1e-9


def random_tables(rng: random.Random, count: int, most: int = 8) -> list[Table]:
    tables = []
    for _ in range(count):
        a, b = rng.randint(1, most), rng.randint(1, most)
        tables.append(Table(rng.randint(0, a), a, rng.randint(0, b), b))
    return tables


def reference_stratified(tables: list[Table]) -> tuple[float, float]:
    """The exact conditional distribution of B's passes from scipy's hypergeometric pmfs,
    convolved with numpy: (two-sided p by the rule of `fisher_exact`, P(S <= observed))."""
    pmf, lowest, observed = np.array([1.0]), 0, 0
    for t in tables:
        if not t.informative:
            continue
        m, n = t.passed_a + t.passed_b, t.trials_a + t.trials_b
        support = np.arange(max(0, m - t.trials_a), min(m, t.trials_b) + 1)
        pmf = np.convolve(pmf, scipy.stats.hypergeom.pmf(support, n, m, t.trials_b))
        lowest += int(support[0])
        observed += t.passed_b
    at = pmf[observed - lowest]
    return float(pmf[pmf <= at * (1 + 1e-7)].sum()), float(pmf[: observed - lowest + 1].sum())


def test_one_task_is_scipys_fisher_exact() -> None:
    rng = random.Random(1)
    for table in random_tables(rng, 300, most=12):
        counts = [
            [table.passed_a, table.trials_a - table.passed_a],
            [table.passed_b, table.trials_b - table.passed_b],
        ]
        expected = scipy.stats.fisher_exact(counts).pvalue
        assert fisher_exact(table) == pytest.approx(expected, abs=TOLERANCE), table


def test_the_stratified_exact_test_is_the_convolution_of_scipys_hypergeometric() -> None:
    rng = random.Random(2)
    checked = 0
    for _ in range(300):
        tables = random_tables(rng, rng.randint(1, 12))
        if not any(t.informative for t in tables):
            continue
        two_sided, lower = reference_stratified(tables)
        result = stratified_exact_test(tables)
        assert result.p_value == pytest.approx(two_sided, abs=TOLERANCE)
        assert result.p_lower == pytest.approx(lower, abs=TOLERANCE)
        checked += 1
    assert checked > 250


def test_the_cmh_statistic_is_statsmodels() -> None:
    rng = random.Random(3)
    for _ in range(200):
        tables = random_tables(rng, rng.randint(1, 10))
        ours = cmh_statistic(tables)
        if ours is None:
            continue
        array = np.array(
            [
                [[t.passed_a, t.trials_a - t.passed_a], [t.passed_b, t.trials_b - t.passed_b]]
                for t in tables
            ],
            dtype=float,
        ).transpose(1, 2, 0)
        reference = StratifiedTable(array).test_null_odds(correction=False)
        assert ours[0] == pytest.approx(reference.statistic, abs=TOLERANCE)
        assert ours[1] == pytest.approx(reference.pvalue, abs=TOLERANCE)


def test_holm_is_statsmodels() -> None:
    rng = random.Random(4)
    for _ in range(50):
        p = [rng.random() ** 3 for _ in range(rng.randint(1, 20))]
        expected = multipletests(p, method="holm")[1]
        assert holm(p) == pytest.approx(list(expected), abs=TOLERANCE)


def random_differences(rng: random.Random, n: int) -> list[Fraction]:
    return [Fraction(rng.randint(0, 4), 4) - Fraction(rng.randint(0, 3), 3) for _ in range(n)]


def test_the_sign_flip_test_is_scipys_exact_permutation_test() -> None:
    """scipy compares floats; the differences are given to it as whole numbers (over their
    common denominator) so that its ties are exact too (the p-value does not change)."""
    rng = random.Random(5)
    for _ in range(60):
        differences = random_differences(rng, rng.randint(2, 13))
        scale = math.lcm(*(d.denominator for d in differences))
        whole = np.array([float(d * scale) for d in differences])
        expected = scipy.stats.permutation_test(
            (whole, np.zeros(len(whole))),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            n_resamples=np.inf,
            vectorized=True,
        ).pvalue
        result = sign_flip_test(differences)
        assert result is not None and result.exact
        assert result.p_value == pytest.approx(expected, abs=TOLERANCE)


def test_past_the_exact_limit_the_sign_flip_test_draws_seeded_flips(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import trialkit.analysis.stats as stats

    differences = random_differences(random.Random(6), 12)
    exact = sign_flip_test(differences)
    monkeypatch.setattr(stats, "MAX_EXACT_SUMS", 8)
    drawn = sign_flip_test(differences, resamples=20_000, seed=1)

    assert exact is not None and drawn is not None
    assert (drawn.exact, drawn.resamples) == (False, 20_000)
    assert drawn == sign_flip_test(differences, resamples=20_000, seed=1)
    assert drawn.p_value == pytest.approx(exact.p_value, abs=0.02)


def test_the_paired_t_test_and_interval_are_scipys() -> None:
    rng = random.Random(7)
    for _ in range(100):
        n = rng.randint(2, 40)
        differences = [float(d) for d in random_differences(rng, n)]
        if len(set(differences)) == 1:
            continue
        for confidence in (0.9, 0.95, 0.99):
            ours = paired_t(differences, confidence)
            reference = scipy.stats.ttest_rel(differences, [0.0] * n)
            interval = reference.confidence_interval(confidence)
            assert ours is not None and ours.p_value is not None
            assert ours.p_value == pytest.approx(reference.pvalue, abs=TOLERANCE)
            assert ours.low == pytest.approx(interval.low, abs=TOLERANCE)
            assert ours.high == pytest.approx(interval.high, abs=TOLERANCE)


@pytest.mark.parametrize("dof", [1, 2, 3, 4, 5, 9, 30, 200, 2.5])
def test_students_t_is_scipys(dof: float) -> None:
    for x in (-40.0, -3.2, -1.0, -0.1, 0.0, 0.7, 2.0, 12.0):
        assert student_t_cdf(x, dof) == pytest.approx(scipy.stats.t.cdf(x, dof), abs=TOLERANCE)
    for q in (0.001, 0.025, 0.2, 0.5, 0.8, 0.95, 0.975, 0.999):
        expected = scipy.stats.t.ppf(q, dof)
        assert student_t_quantile(q, dof) == pytest.approx(expected, abs=TOLERANCE * 10)


def test_the_t_interval_is_scipys() -> None:
    values = [0.8, 0.4, 0.6, 0.2, 0.8]
    figures = t_interval(values, 0.95)
    assert figures is not None
    mean = float(np.mean(values))
    low, high = scipy.stats.t.interval(0.95, 4, loc=mean, scale=scipy.stats.sem(values))
    assert figures == pytest.approx((mean, low, high), abs=TOLERANCE)


def test_the_readme_example_is_clustered_by_task() -> None:
    """5 tasks × 5 trials, 4, 2, 3, 1 and 4 passed: 14/25 pooled was 37.1%–73.3% (Wilson)."""
    rates = [0.8, 0.4, 0.6, 0.2, 0.8]
    low, high = task_mean_interval(rates, 14, 25) or (0, 0)
    assert (round(low, 3), round(high, 3)) == (0.236, 0.884)
    assert wilson_interval(14, 25) == pytest.approx((0.371, 0.733), abs=5e-4)


def test_with_4_tasks_no_test_over_tasks_reaches_5_percent() -> None:
    assert smallest_p(4) == 2 / 16
    assert fewest_tasks(0.95) == 6
    assert fewest_tasks(0.99) == 8
    result = sign_flip_test([Fraction(-1)] * 4)
    assert result is not None and result.p_value == 2 / 16


# -- coverage of the suite pass rate's interval, by simulation ----------------------------------


def coverage(
    tasks: int, spread: str, *, suites: int = 2000, trials: int = 5
) -> tuple[float, float]:
    """(task-clustered, pooled Wilson) coverage of the mean task pass rate of the population
    the tasks are drawn from, over seeded simulated suites."""
    rng = random.Random(tasks * 100 + len(spread))
    clustered = pooled = 0
    for _ in range(suites):
        if spread == "beta(2,2)":
            rates = [rng.betavariate(2, 2) for _ in range(tasks)]
            truth = 0.5
        else:  # uniform over 0.3–1: many easy tasks, some hard ones
            rates = [rng.uniform(0.3, 1.0) for _ in range(tasks)]
            truth = 0.65
        passed = [sum(rng.random() < p for _ in range(trials)) for p in rates]
        low, high = task_mean_interval(
            [c / trials for c in passed], sum(passed), trials * tasks
        ) or (2, 2)
        clustered += low <= truth <= high
        w_low, w_high = wilson_interval(sum(passed), trials * tasks) or (2, 2)
        pooled += w_low <= truth <= w_high
    return clustered / suites, pooled / suites


@pytest.mark.parametrize("tasks", [3, 5, 10])
@pytest.mark.parametrize("spread", ["beta(2,2)", "uniform(0.3,1)"])
def test_the_task_clustered_interval_keeps_its_coverage(tasks: int, spread: str) -> None:
    clustered, pooled = coverage(tasks, spread)

    assert abs(clustered - 0.95) <= 0.03, clustered
    assert pooled < clustered - 0.02, pooled  # trials taken as independent: too narrow


def test_past_the_exact_work_the_stratified_test_is_its_normal_approximation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import trialkit.analysis.stats as stats

    rng = random.Random(8)
    tables = [Table(rng.randint(3, 10), 10, rng.randint(2, 10), 10) for _ in range(300)]
    exact = stratified_exact_test(tables)
    monkeypatch.setattr(stats, "EXACT_WORK", 0)
    approximate = stratified_exact_test(tables)

    assert (exact.exact, approximate.exact) == (True, False)
    assert exact.p_value < 0.05
    assert approximate.p_value == pytest.approx(exact.p_value, rel=0.1)
    assert approximate.p_lower == pytest.approx(exact.p_lower, rel=0.1)


def test_a_suite_of_many_tasks_is_compared_past_the_exact_limits() -> None:
    rng = random.Random(9)
    tables = [Table(rng.randint(0, 10), 10, rng.randint(0, 10), 10) for _ in range(5000)]
    differences = [Fraction(t.passed_b - t.passed_a, 10) for t in tables]

    assert not stratified_exact_test(tables).exact
    flips = sign_flip_test(differences, resamples=2000, seed=3)
    assert flips is not None and not flips.exact
    t = paired_t([float(d) for d in differences], 0.95)
    assert t is not None and t.p_value is not None
    assert flips.p_value == pytest.approx(t.p_value, abs=0.05)  # both near the same answer
