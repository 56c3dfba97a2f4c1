"""The significance tests of `compare` and `health`, over counts of tasks and trials.

- `mcnemar_exact`: two runs' verdicts on the same tasks. Among the tasks that changed, n new
  failures and m fixes; with no difference each is a fair coin, so p is the two-sided binomial
  test of n in n + m at 1/2 (what `scipy.stats.binomtest` gives), summed in integers.
- `cochran_q`: k >= 2 models' verdicts on the same tasks; Q is chi-squared with k − 1 degrees
  of freedom when no model is better (for k = 2 it is McNemar's chi-squared); the tail of
  chi-squared with whole degrees of freedom has a closed form.

Nothing here needs more than the standard library, so `compare` and `health` work without
the `stats` extra. (The tests of `compare` itself are in `trialkit.analysis.stats`.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0


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
