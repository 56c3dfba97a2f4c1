"""A run's report from SQL: a big run is counted and summed by the database, never loaded.

A task of at most `max_results` trials is read whole (its report lists every trial) and built
by the same code as a report in memory. A bigger task is counted, summed and ranked in SQL,
from covering indexes that keep the wide trial rows (transcripts) out of it; only the
non-passing trials its report lists are read. Either way the figures are the floats the report
in memory would have: costs and scores are summed exactly (correctly rounded, like
`math.fsum`), and percentiles read the two ranks `metrics.percentile` interpolates between.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, func, select

from trialkit.report import (
    OUTPUT_PREVIEW_CHARS,
    Measures,
    Report,
    RunInfo,
    SuiteInfo,
    TaskPlan,
    TaskTotals,
    TrialResult,
    assemble_report,
    build_report,
    build_task_report,
    task_report,
    wall_span,
)
from trialkit.score import Verdict
from trialkit.store import rows
from trialkit.store.encoding import SafeText
from trialkit.store.labels import pending_counts
from trialkit.store.schema import TOKEN_COLUMNS, scores, trials
from trialkit.transcript import Usage

_NOT_PASSED = [v.value for v in Verdict if v is not Verdict.PASS]
_TASKS_PER_QUERY = 500
_EXACT_SCALE = 1 << 1074
"""Every float times this is an integer (2**-1074 is the smallest float): exact sums."""


def _result_columns() -> Select[Any]:
    """What a report keeps of a trial, with the start of its output: enough of it for
    `preview_output`, an escaped string (see `encoding.py`) being at most twice as long, plus
    a marker."""
    preview = 2 * (OUTPUT_PREVIEW_CHARS + 1) + 1
    return select(
        trials.c.task_id,
        trials.c.idx,
        trials.c.verdict,
        trials.c.status,
        trials.c.scores,
        func.substr(trials.c.output, 1, preview, type_=SafeText).label("output"),
        trials.c.failed,
        trials.c.error,
        trials.c.duration_s,
        trials.c.started_at,
        trials.c.usage,
        trials.c.cost_usd,
        trials.c.grader_usage,
        trials.c.grader_cost_usd,
    )


def load_report(
    conn: Connection,
    run: RunInfo,
    suite: SuiteInfo,
    plans: Sequence[TaskPlan],
    *,
    max_results: int,
) -> Report:
    """The report of the run `run` (whose plans are `plans`), read in one transaction."""
    totals = _task_totals(conn, run.id)
    planned = {plan.id for plan in plans}
    big = {task for task, counts in totals.items() if counts.trials > max_results} & planned
    if not big:
        results = _results(conn, _result_columns().where(trials.c.run_id == run.id), run.id)
        return build_report(run, suite, plans, results, max_results=max_results)
    small: dict[str, list[TrialResult]] = {}
    wanted = sorted(planned & set(totals) - big)
    for start in range(0, len(wanted), _TASKS_PER_QUERY):  # by task id: seeks, never a scan
        chunk = wanted[start : start + _TASKS_PER_QUERY]
        query = _result_columns().where(trials.c.run_id == run.id, trials.c.task_id.in_(chunk))
        small |= _results(conn, query, run.id)
    unplanned = set(totals) - planned
    scored = _score_sums(conn, run.id)
    pending = pending_counts(conn, run.id)
    tasks = []
    for plan in plans:
        if plan.id not in big:
            tasks.append(build_task_report(plan, small.get(plan.id, []), max_results=max_results))
            continue
        task = _big_task_totals(conn, run.id, plan.id, totals[plan.id], scored.get(plan.id))
        task = replace(task, pending=pending.get(plan.id, 0), **_wall_span(conn, run.id, plan.id))
        tasks.append(task_report(plan, task, _listed(conn, run.id, plan.id, max_results)))
    n = sum(totals[plan.id].trials for plan in plans if plan.id in totals)
    measures = _run_measures(conn, run.id, n, planned, unplanned, scored)
    return assemble_report(run, suite, tasks, measures)


class _Counted:
    """A task's verdict counts and column sums, as the database added them up."""

    def __init__(self) -> None:
        self.verdicts: dict[Verdict, int] = dict.fromkeys(Verdict, 0)
        self.sums: dict[str, int] = dict.fromkeys(TOKEN_COLUMNS, 0)
        self.costs_known = 0
        self.grader_costs_known = 0

    @property
    def trials(self) -> int:
        return sum(self.verdicts.values())

    def usage(self, prefix: str) -> Usage:
        fields = Usage.model_fields
        return Usage.model_validate({name: self.sums[prefix + name] for name in fields})


def _task_totals(conn: Connection, run_id: str) -> dict[str, _Counted]:
    query = (
        select(
            trials.c.task_id,
            trials.c.verdict,
            func.count().label("n"),
            *(func.coalesce(func.sum(trials.c[name]), 0).label(name) for name in TOKEN_COLUMNS),
            func.count(trials.c.cost_usd).label("costs_known"),
            func.count(trials.c.grader_cost_usd).label("grader_costs_known"),
        )
        .where(trials.c.run_id == run_id)
        .group_by(trials.c.task_id, trials.c.verdict)
    )
    found: dict[str, _Counted] = {}
    for row in conn.execute(query):
        counted = found.setdefault(row.task_id, _Counted())
        with rows.decoding(f"run {run_id!r}, task {row.task_id!r}", "verdict"):
            counted.verdicts[Verdict(row.verdict)] += row.n
        for name in TOKEN_COLUMNS:
            counted.sums[name] += int(row._mapping[name])
        counted.costs_known += row.costs_known
        counted.grader_costs_known += row.grader_costs_known
    return found


def _big_task_totals(
    conn: Connection,
    run_id: str,
    task_id: str,
    counted: _Counted,
    scored: tuple[int, int] | None,
) -> TaskTotals:
    n = counted.trials
    cost: float | None = None
    grader_cost: float | None = None
    known = {
        trials.c.cost_usd: counted.costs_known,
        trials.c.grader_cost_usd: counted.grader_costs_known,
    }
    wanted = [column for column, count in known.items() if count == n]
    if wanted:  # every value, for `math.fsum`: SQL's SUM of floats depends on row order
        result = conn.execute(select(*wanted).where(*_task(run_id, task_id)))
        rows = result.cursor.fetchall()  # the driver's tuples: Rows would cost a third more
        result.close()
        sums = {
            c.name: math.fsum(values)
            for c, values in zip(wanted, zip(*rows, strict=True), strict=True)
        }
        cost, grader_cost = sums.get("cost_usd"), sums.get("grader_cost_usd")
    exact, count = scored or (0, 0)
    where = _task(run_id, task_id)
    verdicts = counted.verdicts
    return TaskTotals(
        passed=verdicts[Verdict.PASS],
        failed=verdicts[Verdict.FAIL],
        errors=verdicts[Verdict.ERROR],
        unknown=verdicts[Verdict.UNKNOWN],
        usage=counted.usage(""),
        grader_usage=counted.usage("grader_"),
        cost_usd=cost,
        grader_cost_usd=grader_cost,
        measures=Measures(
            score_sum=exact / _EXACT_SCALE,
            score_count=count,
            latency_p50_s=_percentile(conn, where, n, 50),
            latency_p95_s=_percentile(conn, where, n, 95),
        ),
    )


def _run_measures(
    conn: Connection,
    run_id: str,
    n: int,
    planned: set[str],
    unplanned: set[str],
    scored: dict[str, tuple[int, int]],
) -> Measures:
    """The mean score and latencies of the `n` trials of the run's planned tasks."""
    exact = sum(s for task, (s, _) in scored.items() if task in planned)
    count = sum(c for task, (_, c) in scored.items() if task in planned)
    where: list[ColumnElement[bool]] = [trials.c.run_id == run_id]
    if unplanned:
        where.append(trials.c.task_id.not_in(unplanned))
    return Measures(
        score_sum=exact / _EXACT_SCALE,
        score_count=count,
        latency_p50_s=_percentile(conn, where, n, 50),
        latency_p95_s=_percentile(conn, where, n, 95),
    )


def _score_sums(conn: Connection, run_id: str) -> dict[str, tuple[int, int]]:
    """Per task: the exact sum of its score values (times `_EXACT_SCALE`) and their count.

    Grouped by value, so that the usual scores (0, 1, a judge's tenths) come back as a few
    rows per task however many trials it has."""
    query = (
        select(scores.c.task_id, scores.c.value, func.count().label("n"))
        .where(scores.c.run_id == run_id, scores.c.value.is_not(None))
        .group_by(scores.c.task_id, scores.c.value)
    )
    found: dict[str, tuple[int, int]] = {}
    for row in conn.execute(query):
        exact, count = found.get(row.task_id, (0, 0))
        with rows.decoding(f"run {run_id!r}, task {row.task_id!r}, a score", "value"):
            found[row.task_id] = (exact + _scaled(row.value) * row.n, count + row.n)
    return found


def _scaled(value: float) -> int:
    numerator, denominator = value.as_integer_ratio()
    return numerator * (_EXACT_SCALE // denominator)


def _percentile(
    conn: Connection, where: Iterable[ColumnElement[bool]], n: int, q: float
) -> float | None:
    """`metrics.percentile` of the durations of the `n` trials `where` selects, reading
    only the two ranks it interpolates between (from an index on the durations)."""
    if n == 0:
        return None
    position = (n - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, n - 1)
    ranked = (
        select(trials.c.duration_s)
        .where(*where)
        .order_by(trials.c.duration_s)
        .offset(low)
        .limit(high - low + 1)
    )
    values: list[float] = list(conn.scalars(ranked))
    return values[0] + (values[-1] - values[0]) * (position - low)


def _listed(conn: Connection, run_id: str, task_id: str, max_results: int) -> list[TrialResult]:
    """The first `max_results` non-passing trials of a task, by trial number."""
    # Their numbers first, from the covering index (with ORDER BY … LIMIT, SQLite would walk
    # the primary key instead, reading every wide row until it found enough).
    not_passed = select(trials.c.idx).where(
        *_task(run_id, task_id), trials.c.verdict.in_(_NOT_PASSED)
    )
    keys = heapq.nsmallest(max_results, conn.scalars(not_passed))
    if not keys:
        return []
    query = _result_columns().where(*_task(run_id, task_id), trials.c.idx.in_(keys))
    return sorted(_results(conn, query, run_id).get(task_id, []), key=lambda r: r.trial)


def _wall_span(conn: Connection, run_id: str, task_id: str) -> dict[str, Any]:
    """`first_start` and `last_end` of a task's trials, from the two narrow columns."""
    query = select(trials.c.started_at, trials.c.duration_s).where(*_task(run_id, task_id))
    what = f"run {run_id!r}, task {task_id!r}"
    return wall_span(
        (rows.decode_column(what, row, "started_at", rows.load_datetime), row.duration_s)
        for row in conn.execute(query)
    )


def _task(run_id: str, task_id: str) -> list[ColumnElement[bool]]:
    return [trials.c.run_id == run_id, trials.c.task_id == task_id]


def _results(conn: Connection, query: Select[Any], run_id: str) -> dict[str, list[TrialResult]]:
    found: dict[str, list[TrialResult]] = {}
    for row in conn.execute(query):
        found.setdefault(row.task_id, []).append(rows.trial_result(row, run_id))
    return found
