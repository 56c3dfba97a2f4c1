"""The significance tests of `compare` and `health`, over counts of tasks and trials.

- `mcnemar_exact`: two runs' verdicts on the same tasks. Among the tasks that changed, n new
  failures and m fixes; with no difference each is a fair coin, so p is the two-sided binomial
  test of n in n + m at 1/2 (what `scipy.stats.binomtest` gives), summed in integers.
- `paired_bootstrap`: an interval for the difference of two pooled pass rates over the same
  tasks, resampling tasks with replacement, the same draw for both runs.
- `cochran_q`: k >= 2 models' verdicts on the same tasks; Q is chi-squared with k − 1 degrees
  of freedom when no model is better (for k = 2 it is McNemar's chi-squared); the tail of
  chi-squared with whole degrees of freedom has a closed form.

Only the bootstrap needs numpy (the `stats` extra), imported when it runs; the tests need
nothing beyond the standard library, so `compare` and `health` work without the extra.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trialkit.analysis._deps import missing_numpy

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
_CELLS_PER_DRAW = 1_000_000
"""Resamples are drawn in blocks of about this many task picks, so memory stays bounded."""
_DIGITS = 12
"""Interval ends are rounded to this many decimals: float noise around 0 decides nothing."""


def mcnemar_exact(new_failures: int, fixes: int) -> float:
    """The two-sided exact McNemar p-value: the binomial test of `new_failures` among the
    `new_failures + fixes` tasks that changed verdict, at 1/2. 1 when none changed."""
    if new_failures < 0 or fixes < 0:
        raise ValueError(f"counts must be >= 0, got {new_failures} and {fixes}")
    changed = new_failures + fixes
    # At 1/2 the binomial is symmetric: p is twice the tail of the rarer side, at most 1.
    # Python divides integers correctly rounded, however large they grow.
    tail, term = 0, 1
    for i in range(min(new_failures, fixes) + 1):
        tail += term
        term = term * (changed - i) // (i + 1)
    return min(1.0, 2 * tail / (1 << changed))


def fewest_changed(confidence: float) -> int:
    """The fewest tasks that must change verdict before the exact McNemar test can reach
    p < 1 − `confidence` (all of them one way, p = 2/2^d): 6 at 95%, 8 at 99%."""
    check_confidence(confidence)
    changed = 1
    while mcnemar_exact(changed, 0) >= 1 - confidence:
        changed += 1
    return changed


def pooled_difference(
    baseline: Sequence[tuple[int, int]], candidate: Sequence[tuple[int, int]]
) -> float | None:
    """Pooled pass rate of `candidate` minus that of `baseline`, tasks given as
    (passed, decided); `None` when either has no decided trial."""
    decided_a = sum(d for _, d in baseline)
    decided_b = sum(d for _, d in candidate)
    if not decided_a or not decided_b:
        return None
    return sum(p for p, _ in candidate) / decided_b - sum(p for p, _ in baseline) / decided_a


def paired_bootstrap(
    baseline: Sequence[tuple[int, int]],
    candidate: Sequence[tuple[int, int]],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of `pooled_difference` over paired tasks.

    Task i is (passed, decided) in `baseline[i]` and `candidate[i]`, with decided >= 1 in both.
    Each resample draws task indices with replacement (`numpy.random.default_rng(seed)`) and
    pools both runs over the same draw. `None` when there is no task.
    """
    _check_bootstrap(baseline, candidate, confidence, resamples)
    if not baseline:
        return None
    missing = missing_numpy("the paired bootstrap")
    if missing is not None:
        raise ImportError(missing)
    import numpy as np

    passed_a, decided_a = np.array(baseline, dtype=np.int64).T
    passed_b, decided_b = np.array(candidate, dtype=np.int64).T
    n = len(baseline)
    rng = np.random.default_rng(seed)
    block = max(1, _CELLS_PER_DRAW // n)
    differences = np.empty(resamples)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        picks = rng.integers(0, n, size=(size, n))
        rate_b = passed_b[picks].sum(axis=1) / decided_b[picks].sum(axis=1)
        rate_a = passed_a[picks].sum(axis=1) / decided_a[picks].sum(axis=1)
        differences[start : start + size] = rate_b - rate_a
    tail = (1 - confidence) / 2
    low, high = np.quantile(differences, [tail, 1 - tail])
    return round(float(low), _DIGITS), round(float(high), _DIGITS)


def _check_bootstrap(
    baseline: Sequence[tuple[int, int]],
    candidate: Sequence[tuple[int, int]],
    confidence: float,
    resamples: int,
) -> None:
    if len(baseline) != len(candidate):
        raise ValueError(
            f"paired tasks differ in number: {len(baseline)} in the baseline, "
            f"{len(candidate)} in the candidate"
        )
    for passed, decided in (*baseline, *candidate):
        if decided < 1 or not 0 <= passed <= decided:
            raise ValueError(f"({passed}, {decided}) is not (passed, decided) with decided >= 1")
    check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be >= 1")


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence} must lie strictly between 0 and 1")


def confidence_text(confidence: float) -> str:
    """0.95 as `95%`, 0.975 as `97.5%`."""
    return f"{confidence * 100:g}%"


def cochran_q(rows: Sequence[Sequence[bool]]) -> tuple[float, float]:
    """Cochran's Q and its p-value (chi-squared, k − 1 degrees of freedom) for k >= 2 related
    binary samples: one row per task, one column per model. (0, 1) when no row varies:
    nothing tells the models apart."""
    k = len(rows[0]) if rows else 0
    if k < 2 or any(len(row) != k for row in rows):
        raise ValueError("Cochran's Q needs rows of one length, at least 2")
    columns = [sum(row[j] for row in rows) for j in range(k)]
    row_totals = [sum(row) for row in rows]
    n = sum(row_totals)
    denominator = k * n - sum(r * r for r in row_totals)
    if denominator == 0:
        return 0.0, 1.0
    q = (k - 1) * (k * sum(c * c for c in columns) - n * n) / denominator
    return q, chi2_sf(q, k - 1)


def chi2_sf(x: float, dof: int) -> float:
    """P(X > x) for X chi-squared with `dof` >= 1 whole degrees of freedom.

    With h = x/2: for even dof, e^−h · Σ h^i/i! over i < dof/2 (a Poisson tail); for odd dof,
    erfc(√h) + e^−h · Σ h^(i−½)/Γ(i+½) over 1 <= i <= (dof−1)/2. Each term is the one before
    times h/i (even) or h/(i+½) (odd).
    """
    if dof < 1:
        raise ValueError(f"dof={dof} must be >= 1")
    if x <= 0:
        return 1.0
    h = x / 2
    if dof % 2 == 0:
        terms = [1.0]
        for i in range(1, dof // 2):
            terms.append(terms[-1] * h / i)
        return min(1.0, math.exp(-h) * math.fsum(terms))
    terms = [math.sqrt(h) / math.gamma(1.5)] if dof > 1 else []
    for i in range(2, (dof + 1) // 2):
        terms.append(terms[-1] * h / (i - 0.5))
    return min(1.0, math.erfc(math.sqrt(h)) + math.exp(-h) * math.fsum(terms))
