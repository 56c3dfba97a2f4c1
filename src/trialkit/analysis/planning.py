"""Power: the smallest change a comparison could detect, and the tasks and trials a comparison
needs to detect a given one (`trialkit plan`).

Both questions of docs/statistics.md, at 80% power and a two-sided α = 1 − confidence:

- "Did the agent change on these tasks?" (the exact stratified test of `stats`). If B's pass
  rate is lower than A's by δ on every task, the sum over tasks of B's passes minus their
  expectation has mean −δ·Σw and variance about Σ w·p(1 − p), with w = n_A·n_B/(n_A + n_B) for
  a task of n_A and n_B decided trials and p its pass rate. So the smallest δ found 80% of
  the time is (z_{1−α/2} + z_{0.8})·√(Σ w·p(1 − p)) / Σw.
- "Is the agent better or worse at tasks like these?" (the sign-flip test over tasks). With n
  tasks whose pass rate differences have a spread s, the smallest mean difference is
  (t_{n−1, 1−α/2} + t_{n−1, 0.8})·s/√n, and none at all when 2/2^n >= α: no test over n tasks
  can reach α then (n <= 5 at 95%).

A task's p is (passed + 1)/(decided + 2), so a task that passed every trial still counts as
uncertain (p(1 − p) > 0): a handful of trials cannot show that a rate is exactly 1. The
spread s of the differences is at least what the trials alone give (√ of the mean over tasks
of p(1 − p)·(1/n_A + 1/n_B)): a spread of 0 seen on a few tasks is luck, not precision.
These are normal approximations, good to a few points; the tests themselves are exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from trialkit._record import Record
from trialkit.analysis.stats import Table, t_quantile
from trialkit.metrics import student_t_quantile

DEFAULT_POWER = 0.8


def smoothed_rate(passed: int, decided: int) -> float:
    return (passed + 1) / (decided + 2)


def _z(confidence: float, power: float) -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - (1 - confidence) / 2) + normal.inv_cdf(power)


def detectable_trial_change(
    tables: Sequence[Table], confidence: float, power: float = DEFAULT_POWER
) -> float | None:
    """The smallest drop (or rise) of every task's pass rate the exact stratified test finds
    with probability `power`; None when no task has decided trials in both runs."""
    weight = variance = 0.0
    for t in tables:
        if t.trials_a and t.trials_b:
            w = t.trials_a * t.trials_b / (t.trials_a + t.trials_b)
            p = smoothed_rate(t.passed_a + t.passed_b, t.trials_a + t.trials_b)
            weight += w
            variance += w * p * (1 - p)
    if not weight:
        return None
    return min(1.0, _z(confidence, power) * math.sqrt(variance) / weight)


def smallest_p(tasks: int) -> float:
    """The smallest two-sided p-value any test over `tasks` paired tasks can give: 2/2^n."""
    return min(1.0, 2 / 2**tasks) if tasks < 1024 else 0.0


def fewest_tasks(confidence: float) -> int:
    """The fewest tasks with which a test over tasks can reach p < 1 − `confidence`."""
    n = 1
    while smallest_p(n) >= 1 - confidence:
        n += 1
    return n


def detectable_task_change(
    differences: Sequence[float],
    tables: Sequence[Table],
    confidence: float,
    power: float = DEFAULT_POWER,
) -> float | None:
    """The smallest mean pass rate difference over tasks the test over tasks finds with
    probability `power`; None when the tasks are too few for any test to reach α."""
    n = len(differences)
    if n < fewest_tasks(confidence) or n < 2:
        return None
    mean = math.fsum(differences) / n
    spread = math.sqrt(math.fsum((d - mean) ** 2 for d in differences) / (n - 1))
    floor = math.sqrt(
        math.fsum(
            smoothed_rate(t.passed_a + t.passed_b, t.trials_a + t.trials_b)
            * (1 - smoothed_rate(t.passed_a + t.passed_b, t.trials_a + t.trials_b))
            * (1 / t.trials_a + 1 / t.trials_b)
            for t in tables
        )
        / len(tables)
    )
    factor = t_quantile(confidence, n - 1) + student_t_quantile(power, n - 1)
    return min(1.0, factor * max(spread, floor) / math.sqrt(n))


class PlanRow(Record):
    """What a comparison with `trials` trials a task in each run needs."""

    trials: int
    tasks_for_these_tasks: int
    """Tasks needed to detect the change on these tasks (the gate's question)."""
    tasks_for_tasks_like_these: int
    """Tasks needed to detect it for tasks like these."""


class Plan(Record):
    """How many tasks and trials a comparison needs to detect `detect` (`trialkit plan`)."""

    detect: float
    confidence: float
    power: float
    spread: float
    """The assumed spread (sd) over tasks of the change's size, for tasks like these."""
    tasks: int
    """Tasks with decided trials in the run the plan is made from."""
    trials: int
    """Its trials a task (the most common count)."""
    pass_rate_variance: float
    """The mean over its tasks of p(1 − p), p each task's smoothed pass rate."""
    detectable_now: float | None
    """The smallest change the gate could detect comparing two runs like this one."""
    trials_needed: int | None
    """Trials a task in each run for the gate to detect `detect` with these tasks."""
    rows: list[PlanRow]


PLAN_TRIALS = (1, 2, 3, 5, 10, 20)
_MOST_TASKS = 1_000_000


def plan_comparison(
    counts: Sequence[tuple[int, int]],
    detect: float,
    *,
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
    spread: float | None = None,
) -> Plan:
    """A plan from one run's tasks, each (passed, decided) with decided >= 1: as if a later run
    had the same tasks, pass rates and trials. `spread` defaults to `detect`: the change's
    size varying from task to task by as much as the change itself."""
    if not 0 < detect <= 1:
        raise ValueError(f"the change to detect must lie in (0, 1], got {detect}")
    if not counts:
        raise ValueError("the run has no task with a decided trial to plan from")
    spread = detect if spread is None else spread
    mean_pq = math.fsum(smoothed_rate(p, d) * (1 - smoothed_rate(p, d)) for p, d in counts)
    mean_pq /= len(counts)
    trials = max(set(d for _, d in counts), key=[d for _, d in counts].count)
    z = _z(confidence, power)
    tables = [Table(p, d, p, d) for p, d in counts]
    # The gate: δ = z·√(2·pq/(k·T)), so k·T = 2·z²·pq/δ².
    trial_tasks = 2 * z * z * mean_pq / (detect * detect)
    rows = [
        PlanRow(
            trials=k,
            tasks_for_these_tasks=max(1, math.ceil(trial_tasks / k)),
            tasks_for_tasks_like_these=_tasks_like_these(
                2 * mean_pq / k + spread * spread, detect, confidence, power
            ),
        )
        for k in PLAN_TRIALS
    ]
    return Plan(
        detect=detect,
        confidence=confidence,
        power=power,
        spread=spread,
        tasks=len(counts),
        trials=trials,
        pass_rate_variance=mean_pq,
        detectable_now=detectable_trial_change(tables, confidence, power),
        trials_needed=max(1, math.ceil(trial_tasks / len(counts))),
        rows=rows,
    )


def _tasks_like_these(variance: float, detect: float, confidence: float, power: float) -> int:
    n = max(2, fewest_tasks(confidence))
    sd = math.sqrt(variance)
    while n < _MOST_TASKS:
        factor = t_quantile(confidence, n - 1) + student_t_quantile(power, n - 1)
        if factor * sd / math.sqrt(n) <= detect:
            return n
        # t is close to normal past a few dozen tasks: jump near the answer, then step.
        guess = math.ceil((_z(confidence, power) * sd / detect) ** 2)
        n = max(n + 1, guess if n > 30 else n + 1)
    return _MOST_TASKS
