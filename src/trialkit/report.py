"""The report of a run, built from its trials: per-task and per-suite aggregates.

The records themselves (`Report`, `TaskReport`, `TrialResult`, `Gate`, ...) are defined in
`trialkit.report_records` and importable from here too, so `from trialkit.report import Report`
is the one path to remember. Rendering is in `trialkit.reports`.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Sequence

from trialkit import metrics
from trialkit._record import share_field_sets
from trialkit.models.pricing import add_costs
from trialkit.report_records import (
    MAX_RESULTS_PER_TASK,
    OUTPUT_PREVIEW_CHARS,
    REPORT_SCHEMA_VERSION,
    Gate,
    Measures,
    Report,
    RunInfo,
    SuiteInfo,
    Summary,
    TaskPlan,
    TaskReport,
    TaskTotals,
    TrialResult,
    evaluate_gate,
    preview_output,
    shown_path,
)
from trialkit.run.tally import TaskTally, run_measures, tally
from trialkit.score import Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import Usage

__all__ = [
    "DENSE_KS",
    "MAX_RESULTS_PER_TASK",
    "OUTPUT_PREVIEW_CHARS",
    "REPORT_SCHEMA_VERSION",
    "Gate",
    "Measures",
    "Report",
    "RunInfo",
    "SuiteInfo",
    "Summary",
    "TaskPlan",
    "TaskReport",
    "TaskTotals",
    "TrialResult",
    "assemble_report",
    "build_report",
    "build_summary",
    "build_task_report",
    "evaluate_gate",
    "measures_of",
    "preview_output",
    "reported_ks",
    "shown_path",
    "tallied_report",
    "tallied_task_report",
    "task_report",
    "task_verdict",
    "totals_of",
]

DENSE_KS = 100
"""pass@k and pass^k are reported for every k up to this, then only for the largest k."""


def task_verdict(kind: SuiteKind, verdicts: Sequence[Verdict]) -> Verdict:
    """A task's verdict from its trials' verdicts.

    Capability: passes when at least one trial passed. Regression: passes only when every
    trial passed; a failed trial fails it, otherwise an errored one errors it. A task with no
    trial is an error: nothing was measured.
    """
    if not verdicts:
        return Verdict.ERROR
    present = set(verdicts)
    if kind is SuiteKind.CAPABILITY:
        for v in (Verdict.PASS, Verdict.FAIL, Verdict.ERROR):
            if v in present:
                return v
        return Verdict.UNKNOWN
    for v in (Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN):
        if v in present:
            return v
    return Verdict.PASS


def measures_of(results: Sequence[TrialResult]) -> Measures:
    """Mean score and latency percentiles of `results`."""
    return run_measures([tally(results, 0)])


def totals_of(results: Sequence[TrialResult]) -> TaskTotals:
    """`results` counted and summed, as a running `TaskTally` counts them."""
    return tally(results, 0).totals()


def build_task_report(
    plan: TaskPlan, results: Sequence[TrialResult], *, max_results: int = MAX_RESULTS_PER_TASK
) -> TaskReport:
    return tallied_task_report(plan, tally(results, max_results))


def tallied_task_report(plan: TaskPlan, kept: TaskTally) -> TaskReport:
    """A task's report from the tally of its trials."""
    return task_report(plan, kept.totals(), kept.listed_results())


def task_report(plan: TaskPlan, totals: TaskTotals, results: list[TrialResult]) -> TaskReport:
    """A task's report from its totals and the results it lists (in trial order)."""
    passed, failed = totals.passed, totals.failed
    decided = passed + failed
    trials = decided + totals.errors + totals.unknown
    counts = zip(Verdict, (passed, failed, totals.errors, totals.unknown), strict=True)
    report = TaskReport(
        id=plan.id,
        kind=plan.kind,
        expect=plan.expect,
        tags=plan.tags,
        file=plan.file,
        line=plan.line,
        verdict=task_verdict(plan.kind, [v for v, n in counts if n]),
        trials=trials,
        passed=passed,
        failed=failed,
        errors=totals.errors,
        unknown=totals.unknown,
        pending=totals.pending,
        pass_rate=metrics.rate(passed, decided),
        pass_rate_ci=metrics.wilson_interval(passed, decided),
        pass_at_k=_task_curve(decided, passed, at=True),
        pass_hat_k=_task_curve(decided, passed, at=False),
        flaky=0 < passed < decided,
        mean_score=totals.measures.mean_score,
        latency_p50_s=totals.measures.latency_p50_s,
        latency_p95_s=totals.measures.latency_p95_s,
        wall_s=_wall_seconds(totals),
        usage=totals.usage,
        grader_usage=totals.grader_usage,
        cost_usd=totals.cost_usd,
        grader_cost_usd=totals.grader_cost_usd,
        results=results,
        results_omitted=trials - len(results),
    )
    share_field_sets(report)  # a run of many tasks holds one per task: as light as it can be
    return report


def _wall_seconds(totals: TaskTotals) -> float | None:
    if totals.first_start is None or totals.last_end is None:
        return None
    return (totals.last_end - totals.first_start).total_seconds()


def reported_ks(n: int) -> list[int]:
    """The ks reported for n decided trials: 1 to `DENSE_KS`, then only n itself."""
    ks = list(range(1, min(n, DENSE_KS) + 1))
    return [*ks, n] if n > DENSE_KS else ks


def _task_curve(decided: int, passed: int, *, at: bool) -> dict[str, float]:
    """One task's pass@k (or pass^k) table; tasks of a big run share a few (n, c) pairs."""
    return dict(_cached_task_curve(decided, passed, at))


@functools.lru_cache(maxsize=4096)
def _cached_task_curve(decided: int, passed: int, at: bool) -> dict[str, float]:
    return _PassCurves().table([(decided, passed)], at=at)


class _PassCurves:
    """`metrics.mean_pass_at_k` and `mean_pass_hat_k`, to the same floats, fast for thousands of
    trials: int / int is correctly rounded, as float(Fraction) is, without a gcd of huge ints."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int, int, bool], float] = {}

    def table(self, counts: Sequence[tuple[int, int]], *, at: bool) -> dict[str, float]:
        """{k: mean over tasks}, for the ks `reported_ks` gives the task with fewest trials."""
        decided = Counter((n, c) for n, c in counts if n > 0)
        if not decided:
            return {}
        tasks = decided.total()
        return {
            str(k): _exact_sum((self._value(n, c, k, at), m) for (n, c), m in decided.items())
            / tasks
            for k in reported_ks(min(n for n, _ in decided))
        }

    def _value(self, n: int, c: int, k: int, at: bool) -> float:
        key = (n, c, k, at)
        if key not in self._seen:
            total = math.comb(n, k)  # math.comb is 0 for k > n: pass@k is then exactly 1
            part = total - math.comb(n - c, k) if at else math.comb(c, k)
            self._seen[key] = part / total
        return self._seen[key]


def _exact_sum(terms: Iterable[tuple[float, int]]) -> float:
    """The sum of each `value` taken `times` times, correctly rounded (`math.fsum` of them all),
    from a few distinct values however many tasks share them: each float is an integer over a
    power of two, and int / int is correctly rounded."""
    parts: dict[int, int] = {}
    for value, times in terms:
        numerator, denominator = value.as_integer_ratio()
        parts[denominator] = parts.get(denominator, 0) + numerator * times
    if not parts:
        return 0.0
    common = max(parts)  # powers of two: the largest is a multiple of every other
    return sum(n * (common // d) for d, n in parts.items()) / common


def build_summary(
    tasks: Sequence[TaskReport], measures: Measures, *, duration_s: float | None = None
) -> Summary:
    """Counts, tokens and costs added up from `tasks`; the rest from `measures` of all trials."""
    counts = [(t.decided, t.passed) for t in tasks if t.decided > 0]
    excluded = [t.id for t in tasks if t.decided == 0]
    passed = sum(t.passed for t in tasks)
    failed = sum(t.failed for t in tasks)
    curves = _PassCurves()
    eligible = [t for t in tasks if t.decided >= 2]  # one trial cannot disagree with itself
    rate, rate_ci = metrics.suite_pass_rate([(t.passed, t.decided) for t in tasks])
    return Summary(
        tasks=len(tasks),
        trials=sum(t.trials for t in tasks),
        passed_tasks=sum(t.verdict is Verdict.PASS for t in tasks),
        failed_tasks=sum(t.verdict is Verdict.FAIL for t in tasks),
        error_tasks=sum(t.verdict is Verdict.ERROR for t in tasks),
        unknown_tasks=sum(t.verdict is Verdict.UNKNOWN for t in tasks),
        pass_rate=rate,
        pass_rate_ci=rate_ci,
        pass_at_k=curves.table(counts, at=True),
        pass_hat_k=curves.table(counts, at=False),
        pass_k_excluded=excluded,
        flakiness_rate=sum(t.flaky for t in eligible) / len(eligible) if eligible else None,
        flaky_tasks=sum(t.flaky for t in tasks),
        passed=passed,
        failed=failed,
        errors=sum(t.errors for t in tasks),
        unknown=sum(t.unknown for t in tasks),
        pending=sum(t.pending for t in tasks),
        mean_score=measures.mean_score,
        latency_p50_s=measures.latency_p50_s,
        latency_p95_s=measures.latency_p95_s,
        usage=sum((t.usage for t in tasks), Usage()),
        grader_usage=sum((t.grader_usage for t in tasks), Usage()),
        cost_usd=add_costs(*[t.cost_usd for t in tasks]),
        grader_cost_usd=add_costs(*[t.grader_cost_usd for t in tasks]),
        duration_s=duration_s,
    )


def build_report(
    run: RunInfo,
    suite: SuiteInfo,
    plans: Sequence[TaskPlan],
    results: dict[str, list[TrialResult]],
    *,
    max_results: int = MAX_RESULTS_PER_TASK,
) -> Report:
    """Aggregate trial results into a report; tasks keep the order of `plans`."""
    tallies = {p.id: tally(results.get(p.id, []), max_results) for p in plans}
    return tallied_report(run, suite, plans, tallies)


def tallied_report(
    run: RunInfo, suite: SuiteInfo, plans: Sequence[TaskPlan], tallies: dict[str, TaskTally]
) -> Report:
    """The report of a run from the tallies of its tasks' trials (`trialkit.run.tally`), which
    `plans` all have; tasks keep the order of `plans`."""
    tasks = [tallied_task_report(p, tallies[p.id]) for p in plans]
    return assemble_report(run, suite, tasks, run_measures([tallies[p.id] for p in plans]))


def assemble_report(
    run: RunInfo, suite: SuiteInfo, tasks: list[TaskReport], measures: Measures
) -> Report:
    """The report of `tasks` (in order), with the run-wide `measures` of all their trials."""
    end = run.finished_at
    duration = None if end is None else (end - run.started_at).total_seconds()
    stopped = (run.config.get("adaptive") or {}).get("stopped") or {}
    for task in tasks:
        task.stopped = stopped.get(task.id)
    summary = build_summary(tasks, measures, duration_s=duration)
    controls = run.config.get("judge_controls")
    if controls:  # a judge's negative controls: the run's, not any trial's
        extra = Usage.model_validate(controls["usage"])
        summary.grader_usage = summary.grader_usage + extra
        summary.grader_cost_usd = add_costs(summary.grader_cost_usd, controls["cost_usd"])
        summary.cost_usd = add_costs(summary.cost_usd, controls["cost_usd"])
    return Report(run=run, suite=suite, summary=summary, tasks=tasks)
