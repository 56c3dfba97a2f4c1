"""The tests of `compare`, one for each question asked of two runs (docs/statistics.md).

"Did the agent change on these tasks?" (the CI gate). The tasks are fixed; the trials are the
sample. Each task is a 2×2 table (run × pass/fail) of its decided trials. Given how many
trials of a task passed in both runs together, if the agent did not change each way of
sharing those passes between the runs is equally likely, so B's passes on the task follow a
hypergeometric distribution. The sum S of B's passes over tasks then follows the convolution
of those distributions: `stratified_exact_test` computes it exactly and gives the two-sided
p-value (the outcomes no more likely than the one observed), which is the exact form of the
Cochran–Mantel–Haenszel test (R's `mantelhaen.test(exact = TRUE)`); `cmh_statistic` gives its
large-sample chi-squared for reference. With one task it is Fisher's exact test
(`fisher_exact`). `holm` adjusts the per-task p-values for testing many tasks at once.

"Is the agent better or worse at tasks like these?" The tasks are a sample: each task's pass
rate difference B − A is one observation. `sign_flip_test` is the exact permutation test of
their mean (if nothing changed, each difference is as likely to have either sign), enumerated
exactly, or by seeded Monte Carlo when the distinct sums are too many; `paired_t` gives the t
interval of the mean difference and its t-test (`scipy.stats.ttest_rel`).

Pure Python: the core needs neither scipy nor statsmodels, which check these in the tests.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

from trialkit.metrics import student_t_cdf, student_t_quantile, t_interval

RELATIVE_TIES = 1 + 1e-7
"""Outcomes whose probability is within this factor of the observed one count as no more
likely (the tolerance of R's `fisher.test` and scipy's `fisher_exact`)."""
_PRUNE = 1e-30
"""Probabilities under this share of the largest are dropped while convolving: they change no
p-value at the precision reported, and keep the work proportional to the spread of S."""
MAX_EXACT_SUMS = 1 << 20
"""The sign-flip test enumerates exactly while the distinct sums stay under this many."""
EXACT_WORK = 5_000_000
"""The steps of convolution the stratified test may take (about a second) before it
approximates."""
FLIP_WORK = 1_000_000
"""Likewise for the sign-flip test, whose steps add whole numbers that grow large."""


@dataclass(frozen=True)
class Table:
    """One task's decided trials in two runs: passes and trials in A, passes and trials in B."""

    passed_a: int
    trials_a: int
    passed_b: int
    trials_b: int

    def __post_init__(self) -> None:
        if not (0 <= self.passed_a <= self.trials_a and 0 <= self.passed_b <= self.trials_b):
            raise ValueError(f"{self} is not passes and trials with 0 <= passes <= trials")

    @property
    def informative(self) -> bool:
        """Both runs have trials and both outcomes occur: the table can say something."""
        passes = self.passed_a + self.passed_b
        return (
            self.trials_a > 0 and self.trials_b > 0 and 0 < passes < self.trials_a + self.trials_b
        )


def _hypergeometric(table: Table) -> tuple[int, list[float]]:
    """(lowest, pmf): the distribution of B's passes given the table's margins."""
    m = table.passed_a + table.passed_b
    lowest, highest = max(0, m - table.trials_a), min(m, table.trials_b)
    weights = [
        math.comb(table.trials_b, x) * math.comb(table.trials_a, m - x)
        for x in range(lowest, highest + 1)
    ]
    total = math.comb(table.trials_a + table.trials_b, m)
    return lowest, [w / total for w in weights]  # int / int is correctly rounded


def _convolve(a: list[float], b: list[float]) -> list[float]:
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return out


def _prune(lowest: int, pmf: list[float]) -> tuple[int, list[float]]:
    floor = max(pmf) * _PRUNE
    start = next(i for i, p in enumerate(pmf) if p >= floor)
    end = max(i for i, p in enumerate(pmf) if p >= floor)
    return lowest + start, pmf[start : end + 1]


@dataclass(frozen=True)
class StratifiedTest:
    """The exact stratified test of B's passes against A's, over tasks."""

    tables: int
    """Tasks that could say something (`Table.informative`); the others add no information."""
    observed: int
    """B's passes over those tasks."""
    expected: float
    """B's passes expected over them if nothing changed."""
    p_value: float
    """Two-sided: the probability of a sum no more likely than the observed one."""
    p_lower: float
    """One-sided: P(S <= observed), small when B passes fewer than expected."""
    p_upper: float
    """One-sided: P(S >= observed)."""
    exact: bool = True
    """Computed exactly; else by the normal approximation (very many tasks)."""

    @property
    def direction(self) -> int:
        """−1 when B passed fewer than expected, 1 when more, 0 when as many."""
        gap = self.observed - self.expected
        return 0 if abs(gap) < 1e-9 else (1 if gap > 0 else -1)


def stratified_exact_test(tables: Sequence[Table]) -> StratifiedTest:
    """The exact conditional test that B's pass rate equals A's within every task.

    Exact while the convolution stays within `EXACT_WORK` steps (a few hundred tasks that can
    vary); past that, the normal approximation of the same distribution with a continuity
    correction (`exact` is then False), which over that many tasks agrees with the exact
    p-value to within a fraction of a percent of it.
    """
    used = [t for t in tables if t.informative]
    observed = sum(t.passed_b for t in used)
    expected = variance = 0.0
    for t in used:
        m, n = t.passed_a + t.passed_b, t.trials_a + t.trials_b
        expected += m * t.trials_b / n
        variance += t.trials_a * t.trials_b * m * (n - m) / (n * n * (n - 1))
    lowest, pmf = 0, [1.0]
    work = 0
    for table in used:
        low, dist = _hypergeometric(table)
        work += len(pmf) * len(dist)
        if work > EXACT_WORK:
            return _normal_stratified(len(used), observed, expected, variance)
        lowest, pmf = _prune(lowest + low, _convolve(pmf, dist))
    index = observed - lowest
    at = pmf[index] if 0 <= index < len(pmf) else 0.0
    two_sided = math.fsum(p for p in pmf if p <= at * RELATIVE_TIES)
    lower = math.fsum(pmf[: max(0, index + 1)])
    upper = math.fsum(pmf[max(0, index) :])
    return StratifiedTest(
        tables=len(used),
        observed=observed,
        expected=expected,
        p_value=min(1.0, two_sided),
        p_lower=min(1.0, lower),
        p_upper=min(1.0, upper),
    )


def _normal_stratified(
    tables: int, observed: int, expected: float, variance: float
) -> StratifiedTest:
    sd = math.sqrt(variance)
    normal = NormalDist()
    lower = normal.cdf((observed + 0.5 - expected) / sd)
    upper = 1 - normal.cdf((observed - 0.5 - expected) / sd)
    return StratifiedTest(
        tables=tables,
        observed=observed,
        expected=expected,
        p_value=min(1.0, 2 * min(lower, upper)),
        p_lower=min(1.0, lower),
        p_upper=min(1.0, upper),
        exact=False,
    )


def fisher_exact(table: Table) -> float:
    """Fisher's exact test of one task's table, two-sided (`scipy.stats.fisher_exact`)."""
    return stratified_exact_test([table]).p_value


def cmh_statistic(tables: Sequence[Table]) -> tuple[float, float] | None:
    """The Cochran–Mantel–Haenszel chi-squared (no continuity correction) and its p-value (1
    degree of freedom), as statsmodels' `StratifiedTable.test_null_odds()`; None when no task
    can vary."""
    gap, variance = 0.0, 0.0
    for t in tables:
        n = t.trials_a + t.trials_b
        if n < 2:
            continue
        passes = t.passed_a + t.passed_b
        gap += t.passed_a - t.trials_a * passes / n
        variance += t.trials_a * t.trials_b * passes * (n - passes) / (n * n * (n - 1))
    if variance <= 0:
        return None
    statistic = gap * gap / variance
    return statistic, math.erfc(math.sqrt(statistic / 2))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (statsmodels' `multipletests(...,
    method="holm")`): a task is significant when its adjusted p is under α, with the chance of
    naming any unchanged task at most α however many are tested."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


@dataclass(frozen=True)
class SignFlipTest:
    """The permutation test that the mean paired difference over tasks is 0."""

    tasks: int
    mean: float
    p_value: float
    """Two-sided, `scipy.stats.permutation_test`'s: twice the smaller tail, at most 1."""
    exact: bool
    """Enumerated; else `resamples` seeded random sign flips."""
    resamples: int
    smallest_p: float
    """The smallest p-value the test can give with these tasks: 2 / 2^n, n the tasks whose
    difference is not 0 (at most 1)."""


def sign_flip_test(
    differences: Sequence[Fraction], *, resamples: int = 10_000, seed: int = 0
) -> SignFlipTest | None:
    """Exact sign-flip test of the mean of `differences` (one per task); None for none.

    The differences are exact fractions, brought to whole numbers over their common
    denominator, so ties are counted exactly. The null distribution of their sum is counted
    exactly by convolution (tasks with the same |d| together: a binomial number of them is
    positive) while the distinct sums stay under `MAX_EXACT_SUMS` and the work under
    `FLIP_WORK`; past that, `resamples` random sign flips drawn with `random.Random(seed)`,
    and p = (hits + 1) / (resamples + 1).
    """
    n = len(differences)
    if not n:
        return None
    scale = math.lcm(*(d.denominator for d in differences))
    values = [abs(int(d * scale)) for d in differences]
    observed = sum(int(d * scale) for d in differences)
    nonzero = sum(1 for v in values if v)
    smallest = min(1.0, 2 / 2**nonzero) if nonzero < 1024 else 0.0
    mean = float(Fraction(observed, scale) / n)
    # Tasks of one |difference| v, c of them, add v·(2k − c) with k ~ Binomial(c, 1/2).
    groups = sorted(Counter(v for v in values if v).items())
    counts: dict[int, int] | None = {0: 1}
    work = 0
    for v, c in groups:
        assert counts is not None
        work += len(counts) * (c + 1)
        if work > FLIP_WORK:
            counts = None
            break
        ways = [math.comb(c, k) for k in range(c + 1)]
        step: dict[int, int] = {}
        for total, w in counts.items():
            for k, shares in enumerate(ways):
                key = total + v * (2 * k - c)
                step[key] = step.get(key, 0) + w * shares
        if len(step) > MAX_EXACT_SUMS:
            counts = None
            break
        counts = step
    if counts is not None:
        whole = 1 << nonzero
        at_most = sum(w for s, w in counts.items() if s <= observed)
        at_least = sum(w for s, w in counts.items() if s >= observed)
        p = min(1.0, 2 * min(at_most, at_least) / whole)
        return SignFlipTest(n, mean, p, True, 0, smallest)
    rng = random.Random(seed)
    low = high = 0
    for _ in range(resamples):
        total = sum(v * (2 * rng.getrandbits(c).bit_count() - c) for v, c in groups)
        low += total <= observed
        high += total >= observed
    p = min(1.0, 2 * (min(low, high) + 1) / (resamples + 1))
    return SignFlipTest(n, mean, p, False, resamples, smallest)


@dataclass(frozen=True)
class PairedT:
    """Student's t over paired differences (`scipy.stats.ttest_rel` and its interval)."""

    mean: float
    low: float
    high: float
    p_value: float | None
    """Two-sided; None when every difference is the same (no spread to test against)."""


def paired_t(differences: Sequence[float], confidence: float) -> PairedT | None:
    """The t interval of the mean difference and the t-test that it is 0; None under 2."""
    figures = t_interval(differences, confidence)
    if figures is None:
        return None
    mean, low, high = figures
    n = len(differences)
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    if sd == 0:
        return PairedT(mean, low, high, None)
    t = mean / (sd / math.sqrt(n))
    return PairedT(mean, low, high, min(1.0, 2 * student_t_cdf(-abs(t), n - 1)))


def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided critical value of Student's t at `confidence`."""
    return student_t_quantile(1 - (1 - confidence) / 2, dof)
