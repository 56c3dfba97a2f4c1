"""Metrics over trial outcomes: pass@k, pass^k, confidence intervals, flakiness, latency.

Everything here is a pure function over plain numbers so that reports, the CLI and tests can
share one definition of each metric. The estimators are computed exactly with integer binomial
coefficients and `Fraction`: the float product form used by some tools silently returns 1.0 for
impossible inputs, and `float(comb(2000, 1000))` overflows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from statistics import NormalDist

__all__ = [
    "flakiness_rate",
    "is_flaky",
    "latency_summary",
    "mean_pass_at_k",
    "mean_pass_hat_k",
    "pass_at_k",
    "pass_at_k_table",
    "pass_hat_k",
    "pass_hat_k_table",
    "percentile",
    "rate",
    "student_t_cdf",
    "student_t_quantile",
    "suite_pass_rate",
    "supported_ks",
    "t_interval",
    "task_mean_interval",
    "wilson_interval",
]


def _check_counts(n: int, c: int, k: int, metric: str) -> None:
    """Reject inputs the estimators are undefined for, rather than guess a value."""
    if n < 1:
        raise ValueError(f"n={n} trials is not enough; {metric} needs at least one trial (n >= 1)")
    if not 0 <= c <= n:
        raise ValueError(
            f"c={c} passes is impossible with n={n} trials; {metric} needs 0 <= c <= n"
        )
    if k < 1:
        raise ValueError(f"k={k} is not a valid sample size; {metric} needs k >= 1")
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} trials of this task; {metric} needs k <= n")


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass@k for one task: the chance that k of its n trials, drawn without
    replacement, include at least one pass (Chen et al. 2021).

    Exact: 1 − C(n−c, k) / C(n, k). When fewer than k trials failed, every draw of k contains
    a pass and the value is exactly 1. Raises `ValueError` for k > n instead of returning 1.
    """
    _check_counts(n, c, k, "pass@k")
    if n - c < k:
        return Fraction(1)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_hat_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass^k for one task: the chance that k of its n trials, drawn without
    replacement, all pass (Yao et al. 2024, τ-bench).

    Exact: C(c, k) / C(n, k). Preferred to (c/n)^k, which overstates reliability for small n.
    """
    _check_counts(n, c, k, "pass^k")
    return Fraction(math.comb(c, k), math.comb(n, k))


def _mean_over_tasks(
    counts: Sequence[tuple[int, int]],
    k: int,
    estimator: Callable[[int, int, int], Fraction],
) -> float | None:
    """Average a per-task estimator; name the offending task so a caller can fix its input."""
    if not counts:
        return None
    values: list[float] = []
    for index, (n, c) in enumerate(counts):
        try:
            value = estimator(n, c, k)
        except ValueError as exc:
            raise ValueError(f"task #{index} (n={n}, c={c}): {exc}") from None
        values.append(float(value))
    return math.fsum(values) / len(values)


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float | None:
    """pass@k averaged over tasks given as (trials, passes) pairs; None when there are none.

    Each task is converted to float only after its exact value is known, so huge binomial
    coefficients never reach floating point.
    """
    return _mean_over_tasks(counts, k, pass_at_k)


def mean_pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> float | None:
    """pass^k averaged over tasks given as (trials, passes) pairs; None when there are none."""
    return _mean_over_tasks(counts, k, pass_hat_k)


def supported_ks(counts: Sequence[tuple[int, int]]) -> list[int]:
    """The k values every task supports: 1..min(n).

    Only these are reported, because averaging pass@k over the subset of tasks that happen to
    have enough trials would compare different task sets under one number. A task with no
    trials therefore leaves no k supported.
    """
    if not counts:
        return []
    return list(range(1, min(n for n, _ in counts) + 1))


def pass_at_k_table(counts: Sequence[tuple[int, int]]) -> dict[int, float]:
    """pass@k for every supported k, for a report's curve."""
    table: dict[int, float] = {}
    for k in supported_ks(counts):
        value = mean_pass_at_k(counts, k)
        if value is not None:
            table[k] = value
    return table


def pass_hat_k_table(counts: Sequence[tuple[int, int]]) -> dict[int, float]:
    """pass^k for every supported k, for a report's curve."""
    table: dict[int, float] = {}
    for k in supported_ks(counts):
        value = mean_pass_hat_k(counts, k)
        if value is not None:
            table[k] = value
    return table


def _check_proportion(successes: int, n: int) -> None:
    if n < 0:
        raise ValueError(f"n={n} is negative; a count of trials must be >= 0")
    if not 0 <= successes <= n:
        raise ValueError(
            f"successes={successes} is impossible out of n={n}; needs 0 <= successes <= n"
        )


def rate(successes: int, n: int) -> float | None:
    """successes / n, or None when n == 0: a rate with no data is unknown, never 0."""
    _check_proportion(successes, n)
    if n == 0:
        return None
    return successes / n


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a proportion; None when n == 0.

    Wilson rather than the normal approximation because eval suites are small and pass rates
    sit near 0 or 1, where the normal interval collapses to zero width or leaves [0, 1].
    """
    _check_proportion(successes, n)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must lie strictly between 0 and 1")
    if n == 0:
        return None
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half_width = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    lower = 0.0 if successes == 0 else max(0.0, centre - half_width)
    upper = 1.0 if successes == n else min(1.0, centre + half_width)
    return lower, upper


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function, evaluated by the
    modified Lentz method; converges quickly for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    value = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            value *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return value


def _regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def student_t_cdf(x: float, dof: float) -> float:
    """P(T <= x) for Student's t with `dof` > 0 degrees of freedom (through the regularized
    incomplete beta function: the tail beyond |x| is I_{dof/(dof + x²)}(dof/2, 1/2) / 2)."""
    if dof <= 0:
        raise ValueError(f"dof={dof} must be > 0")
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    tail = 0.5 * _regularized_beta(dof / 2, 0.5, dof / (dof + x * x))
    return 1.0 - tail if x > 0 else tail


@functools.lru_cache(maxsize=256)
def student_t_quantile(q: float, dof: float) -> float:
    """The x with P(T <= x) = q for Student's t with `dof` degrees of freedom, by bisection to
    the precision of a float."""
    if not 0 < q < 1:
        raise ValueError(f"q={q} must lie strictly between 0 and 1")
    if q < 0.5:
        return -student_t_quantile(1 - q, dof)
    if q == 0.5:
        return 0.0
    low, high = 0.0, 1.0
    while student_t_cdf(high, dof) < q:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if student_t_cdf(middle, dof) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def t_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float] | None:
    """(mean, low, high): Student's t interval of the mean of `values` (what
    `scipy.stats.t.interval(confidence, n − 1, mean, sem)` gives); None for fewer than 2."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must lie strictly between 0 and 1")
    n = len(values)
    if n < 2:
        return None
    mean = math.fsum(values) / n
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = student_t_quantile(1 - (1 - confidence) / 2, n - 1) * math.sqrt(variance / n)
    return mean, mean - half, mean + half


def task_mean_interval(
    rates: Sequence[float], passed: int, decided: int, confidence: float = 0.95
) -> tuple[float, float] | None:
    """The task-clustered interval of a suite's pass rate, the mean of its tasks' `rates`
    (tasks are the sample; trials are clustered in them): Student's t interval over the task
    rates, widened where needed to hold the Wilson interval of the `passed` of `decided`
    trials pooled, and kept in [0, 1]. None when no task has a rate.

    The t interval over tasks covers what varies from task to task; with 3–10 tasks it keeps
    its coverage where a Wilson interval over pooled trials, which takes trials to be
    independent, is 2–3 times too narrow. The Wilson interval is its floor: when every task
    has the same rate (all passed, say) the t interval is zero wide, and the trials still say
    how uncertain each rate is. With one task the interval is that task's Wilson interval.
    """
    wilson = wilson_interval(passed, decided, confidence)
    if not rates or wilson is None:
        return None
    figures = t_interval(rates, confidence)
    if figures is None:
        return wilson
    _, low, high = figures
    return max(0.0, min(low, wilson[0])), min(1.0, max(high, wilson[1]))


def suite_pass_rate(
    counts: Sequence[tuple[int, int]], confidence: float = 0.95
) -> tuple[float | None, tuple[float, float] | None]:
    """A suite's pass rate and its interval from its tasks' (passed, decided) trials: the mean
    over tasks with a decided trial of each task's pass rate (pass@1), with the
    task-clustered interval (`task_mean_interval`). (None, None) when no trial was decided."""
    rates = [passed / decided for passed, decided in counts if decided]
    if not rates:
        return None, None
    passed = sum(p for p, d in counts if d)
    decided = sum(d for _, d in counts)
    interval = task_mean_interval(rates, passed, decided, confidence)
    return math.fsum(rates) / len(rates), interval


def is_flaky(outcomes: Sequence[bool]) -> bool:
    """True when a task's trials disagree: at least one passed and at least one did not."""
    return any(outcomes) and not all(outcomes)


def flakiness_rate(groups: Sequence[Sequence[bool]]) -> float | None:
    """Share of tasks whose trials disagree, among tasks with at least two trials.

    A single trial cannot disagree with itself, so such tasks would only dilute the rate;
    they are left out of the denominator. None when no task has two trials.
    """
    eligible = [outcomes for outcomes in groups if len(outcomes) >= 2]
    if not eligible:
        return None
    return sum(1 for outcomes in eligible if is_flaky(outcomes)) / len(eligible)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks.

    Matches numpy's default ('linear') method so numbers agree with users' notebooks.
    None for no values.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"q={q} is not a percentile; q must lie in [0, 100]")
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def latency_summary(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, mean and max of latencies; every entry is None when there are none."""
    if not values:
        return {"p50": None, "p95": None, "mean": None, "max": None}
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": math.fsum(values) / len(values),
        "max": max(values),
    }
