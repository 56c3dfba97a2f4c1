"""A run's headline figures from SQL, equal to the summary `Store.load_report` gives.

Verdicts are counted per task by the database (from the covering index `ix_trials_report`),
durations summed per task (from `ix_trials_task_duration`); only the tasks' counts and the
cost column come back, never the wide rows. The pass rate, its interval, pass^k and the cost
are then the floats the report has: the same formulas on the same per-task counts, and costs
summed per task with `math.fsum`, then over tasks with `add_costs`, as reports do.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from sqlalchemy import Connection, func, select

from trialkit import metrics
from trialkit.models.pricing import add_costs
from trialkit.report import task_verdict
from trialkit.score import Verdict
from trialkit.store import kept_reports
from trialkit.store.encoding import escape_nul, unescape_nul
from trialkit.store.schema import run_tasks, trials
from trialkit.task import SuiteKind

_RUNS_PER_QUERY = 200
_NONE = dict.fromkeys(Verdict, 0)


@dataclass
class TaskCounts:
    """One planned task of a run: its kind and its trials counted by verdict."""

    kind: SuiteKind
    verdicts: dict[Verdict, int] = field(default_factory=lambda: _NONE.copy())

    @property
    def trials(self) -> int:
        return sum(self.verdicts.values())

    @property
    def decided(self) -> int:
        return self.verdicts[Verdict.PASS] + self.verdicts[Verdict.FAIL]

    def verdict(self) -> Verdict:
        """The task's verdict, as its report decides it (an error when it has no trial)."""
        return task_verdict(self.kind, [v for v, n in self.verdicts.items() if n])


@dataclass(frozen=True)
class RunFigures:
    """What a run's report summary says of it, with the mean trial duration besides."""

    tasks: int
    trials: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None
    pass_rate_ci: tuple[float, float] | None
    k: int | None
    """The largest k the report gives pass^k for: the fewest decided trials of any task
    with one (the run's trials per task, when none errored)."""
    pass_hat_k: float | None
    cost_usd: float | None
    mean_latency_s: float | None
    unplanned: frozenset[str] = frozenset()
    """Tasks with trials that the run did not plan (a report leaves them out)."""
    latencies: tuple[float | None, float | None] | None = None
    """The report's p50 and p95 trial durations, when they were kept with the figures."""

    def to_kept(self) -> dict[str, Any]:
        """The figures as the JSON object `kept_reports` keeps (floats exactly: JSON numbers
        written by `repr`)."""
        kept = {name: getattr(self, name) for name in _FIELDS}
        kept["unplanned"] = sorted(self.unplanned)
        return kept

    @classmethod
    def from_kept(cls, kept: dict[str, Any]) -> RunFigures:
        ci, latencies = kept["pass_rate_ci"], kept["latencies"]
        fields = {name: kept[name] for name in _FIELDS}
        return cls(
            **fields
            | {
                "pass_rate_ci": None if ci is None else (ci[0], ci[1]),
                "latencies": None if latencies is None else (latencies[0], latencies[1]),
                "unplanned": frozenset(kept["unplanned"]),
            }
        )


_FIELDS = (
    "tasks",
    "trials",
    "passed",
    "failed",
    "errors",
    "pass_rate",
    "pass_rate_ci",
    "k",
    "pass_hat_k",
    "cost_usd",
    "mean_latency_s",
    "latencies",
)


def chunks(items: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _RUNS_PER_QUERY):
        yield list(items[start : start + _RUNS_PER_QUERY])


def planned_counts(
    conn: Connection, run_ids: Sequence[str], task_ids: Sequence[str] | None = None
) -> dict[str, dict[str, TaskCounts]]:
    """{run id: {planned task id: its counts}}, tasks in the suite's order; only `task_ids`
    when given."""
    found: dict[str, dict[str, TaskCounts]] = {run_id: {} for run_id in run_ids}
    plans = select(run_tasks.c.run_id, run_tasks.c.task_id, run_tasks.c.kind).order_by(
        run_tasks.c.run_id, run_tasks.c.position
    )
    counts = select(
        trials.c.run_id, trials.c.task_id, trials.c.verdict, func.count().label("n")
    ).group_by(trials.c.run_id, trials.c.task_id, trials.c.verdict)
    if task_ids is not None:
        plans = plans.where(run_tasks.c.task_id.in_(list(task_ids)))
        counts = counts.where(trials.c.task_id.in_(list(task_ids)))
    kinds = {kind.value: kind for kind in SuiteKind}
    verdicts = {verdict.value: verdict for verdict in Verdict}
    for chunk in chunks(run_ids):
        for row in conn.execute(plans.where(run_tasks.c.run_id.in_(chunk))):
            found[row.run_id][row.task_id] = TaskCounts(kinds[row.kind])
        result = conn.execute(counts.where(trials.c.run_id.in_(chunk)))
        escaped = {escape_nul(run_id): run_id for run_id in chunk}
        for run_id, task_id, verdict, n in result.cursor.fetchall():  # the driver's tuples
            task = found[escaped[run_id]].get(unescape_nul(task_id))
            if task is not None:  # a report counts planned tasks only
                # A verdict that is none (changed behind trialkit's back) is an error.
                task.verdicts[verdicts.get(verdict, Verdict.ERROR)] += n
        result.close()
    return found


def run_figures(conn: Connection, configs: dict[str, dict[str, Any]]) -> dict[str, RunFigures]:
    """The figures of each run of `configs` (run id: its stored config): those kept with a
    finished run's report while the run is as it was (`kept_reports`), else from SQL."""
    found: dict[str, RunFigures] = {}
    for run_id, kept in kept_reports.kept_figures(conn, list(configs)).items():
        try:
            found[run_id] = RunFigures.from_kept(kept)
        except (KeyError, TypeError, IndexError):  # not as this trialkit keeps them
            continue
    rest = {run_id: config for run_id, config in configs.items() if run_id not in found}
    return found | computed_figures(conn, rest) if rest else found


def computed_figures(conn: Connection, configs: dict[str, dict[str, Any]]) -> dict[str, RunFigures]:
    """The figures of each run of `configs`, from SQL."""
    run_ids = list(configs)
    planned = planned_counts(conn, run_ids)
    costs = _task_costs(conn, run_ids)
    durations = _durations(conn, run_ids)
    found: dict[str, RunFigures] = {}
    for run_id, config in configs.items():
        tasks = planned[run_id]
        task_costs = [costs[run_id].get(task_id, 0.0) for task_id in tasks]
        controls = config.get("judge_controls")
        if controls:
            task_costs.append(controls["cost_usd"])
        sums = [durations[run_id][task_id] for task_id in tasks if task_id in durations[run_id]]
        total = math.fsum(s for s, _ in sums)
        count = sum(n for _, n in sums)
        found[run_id] = _figures(
            list(tasks.values()),
            add_costs(*task_costs),
            total / count if count else None,
            frozenset(durations[run_id]) - set(tasks),
        )
    return found


def _figures(
    tasks: list[TaskCounts],
    cost: float | None,
    mean_latency: float | None,
    unplanned: frozenset[str],
) -> RunFigures:
    passed = sum(t.verdicts[Verdict.PASS] for t in tasks)
    failed = sum(t.verdicts[Verdict.FAIL] for t in tasks)
    histogram: dict[tuple[int, int], int] = defaultdict(int)
    for t in tasks:
        if t.decided:
            histogram[t.decided, t.verdicts[Verdict.PASS]] += 1
    k = min((n for n, _ in histogram), default=None)
    rate, rate_ci = metrics.suite_pass_rate([(t.verdicts[Verdict.PASS], t.decided) for t in tasks])
    return RunFigures(
        tasks=len(tasks),
        trials=sum(t.trials for t in tasks),
        passed=passed,
        failed=failed,
        errors=sum(t.verdicts[Verdict.ERROR] for t in tasks),
        # The report's figures: the mean over tasks and its task-clustered interval.
        pass_rate=rate,
        pass_rate_ci=rate_ci,
        k=k,
        pass_hat_k=None if k is None else pass_hat_k(histogram, k),
        cost_usd=cost,
        mean_latency_s=mean_latency,
        unplanned=unplanned,
    )


def pass_hat_k(histogram: dict[tuple[int, int], int], k: int) -> float:
    """pass^k averaged over tasks given as {(decided, passed): how many tasks}, to the float
    the report computes (each task's C(c, k) / C(n, k) correctly rounded, then `math.fsum`)."""
    values = (
        repeat(math.comb(c, k) / math.comb(n, k), tasks) for (n, c), tasks in histogram.items()
    )
    return math.fsum(v for group in values for v in group) / sum(histogram.values())


def _task_costs(conn: Connection, run_ids: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """{run id: {task id: its trials' cost (`math.fsum`), `None` when one is unknown}}.

    Every value is read, since SQL's SUM of floats depends on row order: as one column in task
    order (from the covering index), cut into tasks by their counts, read in the same order."""
    found: dict[str, dict[str, float | None]] = {}
    for run_id in run_ids:
        of_run = trials.c.run_id == run_id
        counts = conn.execute(
            select(trials.c.task_id, func.count())
            .where(of_run)
            .group_by(trials.c.task_id)
            .order_by(trials.c.task_id)
        ).all()
        result = conn.execute(select(trials.c.cost_usd).where(of_run).order_by(trials.c.task_id))
        costs = [cost for (cost,) in result.cursor.fetchall()]  # the driver's tuples: no Rows
        result.close()
        start = 0
        found[run_id] = {}
        for task_id, n in counts:
            found[run_id][task_id] = _added(costs[start : start + n])
            start += n
    return found


def _added(costs: Sequence[Any]) -> float | None:
    """`add_costs` of `costs`; `None` (unknown) when one is not a number (a value changed
    behind trialkit's back)."""
    try:
        return add_costs(*costs)
    except TypeError:
        return None


def _durations(conn: Connection, run_ids: Sequence[str]) -> dict[str, dict[str, tuple[float, int]]]:
    """{run id: {task id: (sum of its trials' durations, their count)}}."""
    query = select(
        trials.c.run_id,
        trials.c.task_id,
        func.sum(trials.c.duration_s).label("total"),
        func.count().label("n"),
    ).group_by(trials.c.run_id, trials.c.task_id)
    found: dict[str, dict[str, tuple[float, int]]] = {run_id: {} for run_id in run_ids}
    for chunk in chunks(run_ids):
        for row in conn.execute(query.where(trials.c.run_id.in_(chunk))):
            found[row.run_id][row.task_id] = (float(row.total), int(row.n))
    return found
