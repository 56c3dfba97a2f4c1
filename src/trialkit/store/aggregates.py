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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    Connection,
    Select,
    Text,
    func,
    select,
    type_coerce,
    union_all,
)

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
)
from trialkit.score import Verdict
from trialkit.store import rows
from trialkit.store.encoding import SafeText, unescape_nul
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
        trials.c.sandbox,
    )


def load_report(
    conn: Connection,
    run: RunInfo,
    suite: SuiteInfo,
    plans: Sequence[TaskPlan],
    *,
    max_results: int,
) -> Report:
    """The report of the run `run` (whose plans are `plans`), read in one transaction.

    A fixed number of queries whatever the number of tasks (a few per 500 of them): counts,
    sums and spans come from one pass over covering indexes each, never from the wide rows."""
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
    spans = _spans(conn, run.id, big)
    listed = _listed(conn, run.id, big, max_results)
    tasks = []
    for plan in plans:
        if plan.id not in big:
            tasks.append(build_task_report(plan, small.get(plan.id, []), max_results=max_results))
            continue
        task = _big_task_totals(totals[plan.id], scored.get(plan.id), spans[plan.id])
        task = replace(task, pending=pending.get(plan.id, 0))
        tasks.append(task_report(plan, task, listed.get(plan.id, [])))
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
            type_coerce(trials.c.task_id, Text),  # as stored: unescaped below
            trials.c.verdict,
            func.count().label("n"),
            func.count(trials.c.cost_usd).label("costs_known"),
            func.count(trials.c.grader_cost_usd).label("grader_costs_known"),
            *(func.coalesce(func.sum(trials.c[name]), 0).label(name) for name in TOKEN_COLUMNS),
        )
        .where(trials.c.run_id == run_id)
        .group_by(trials.c.task_id, trials.c.verdict)
    )
    found: dict[str, _Counted] = {}
    for batch in _driver_batches(conn, query, _SPAN_BATCH):
        for stored, verdict, n, costs_known, grader_costs_known, *sums in batch:
            counted = found.get(stored)
            if counted is None:
                counted = found[stored] = _Counted()
            # A verdict that is none (a row changed behind trialkit's back) is an error, as
            # the row is when listed (`rows.unreadable_row`).
            counted.verdicts[_VERDICTS.get(verdict, Verdict.ERROR)] += n
            for name, value in zip(TOKEN_COLUMNS, sums, strict=True):
                counted.sums[name] += int(value)
            counted.costs_known += costs_known
            counted.grader_costs_known += grader_costs_known
    return {unescape_nul(stored): counted for stored, counted in found.items()}


_VERDICTS = {v.value: v for v in Verdict}


def _big_task_totals(counted: _Counted, scored: tuple[int, int] | None, span: _Span) -> TaskTotals:
    exact, count = scored or (0, 0)
    verdicts = counted.verdicts
    return TaskTotals(
        passed=verdicts[Verdict.PASS],
        failed=verdicts[Verdict.FAIL],
        errors=verdicts[Verdict.ERROR],
        unknown=verdicts[Verdict.UNKNOWN],
        usage=counted.usage(""),
        grader_usage=counted.usage("grader_"),
        cost_usd=span.cost_usd,
        grader_cost_usd=span.grader_cost_usd,
        first_start=span.first_start,
        last_end=span.last_end,
        measures=Measures(
            score_sum=exact / _EXACT_SCALE,
            score_count=count,
            latency_p50_s=span.percentile(50),
            latency_p95_s=span.percentile(95),
        ),
    )


class _Span:
    """A task's figures from its trials in duration order: percentiles, exact costs
    (`math.fsum`, `None` unless every trial's is known) and, given apart, its wall span."""

    def __init__(self, held: list[tuple[Any, ...]]) -> None:
        durations, costs, grader_costs = zip(*held, strict=True)
        self.durations: Sequence[float] = durations
        self.cost_usd = _fsum(costs)
        self.grader_cost_usd = _fsum(grader_costs)
        self.first_start: datetime | None = None
        self.last_end: datetime | None = None

    def percentile(self, q: float) -> float | None:
        """`metrics.percentile` of the durations (which are in order); `None` when one that
        it reads is not a number (a row changed behind trialkit's back)."""
        values = self.durations
        position = (len(values) - 1) * q / 100
        low = math.floor(position)
        high = min(low + 1, len(values) - 1)
        try:
            return float(values[low] + (values[high] - values[low]) * (position - low))
        except TypeError:
            return None


def _fsum(values: Sequence[Any]) -> float | None:
    """`math.fsum` of `values`; `None` when one is unknown (or not a number at all)."""
    if None in values:
        return None
    try:
        return math.fsum(values)
    except TypeError:
        return None


_SPAN_BATCH = 10_000


def _spans(conn: Connection, run_id: str, tasks: set[str]) -> dict[str, _Span]:
    """The `_Span` of each of `tasks`, from `ix_trials_task_span`: the durations and costs in
    one streamed pass (only one task's are held at a time), the first start and last end
    added up by the database."""
    stored_task = type_coerce(trials.c.task_id, Text)  # as stored: unescaped once per task
    c = trials.c
    query = (
        select(stored_task, c.duration_s, c.cost_usd, c.grader_cost_usd)
        .where(c.run_id == run_id)
        .order_by(c.task_id, c.duration_s)
    )
    found: dict[str, _Span] = {}
    stored: str | None = None
    held: list[tuple[Any, ...]] = []

    def keep() -> None:
        task = unescape_nul(stored or "")
        if task in tasks:
            found[task] = _Span(held)

    for batch in _driver_batches(conn, query, _SPAN_BATCH):
        for row in batch:
            if row[0] != stored:
                if stored is not None:
                    keep()
                stored, held = row[0], []
            held.append(row[1:])
    if stored is not None:
        keep()
    # Stored in one format (UTC, microseconds), so the text sorts as the times do. An end is
    # unknown only for a duration no datetime can hold: the span is then unknown.
    ends = (
        select(c.task_id, func.min(c.started_at), func.max(c.ended_at), func.count(c.ended_at))
        .where(c.run_id == run_id)
        .group_by(c.task_id)
    )
    for task_id, first, last, known in conn.execute(ends):
        span = found.get(task_id)
        if span is None or known < len(span.durations):
            continue
        try:  # a time that is none (changed behind trialkit's back): the span is unknown
            span.first_start, span.last_end = _time(first), _time(last)
        except rows.CORRUPTION_ERRORS:
            continue
    return found


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _driver_batches(
    conn: Connection, query: Select[Any], size: int
) -> Iterator[Sequence[tuple[Any, ...]]]:
    """The rows of `query` in batches of `size`, as little decoded as can be: the driver's own
    tuples on SQLite (a Row costs a third more), a server-side cursor's rows on PostgreSQL
    (SQLAlchemy reads one row ahead from those, so their cursor is not read directly)."""
    if conn.dialect.name == "sqlite":
        result = conn.execute(query)
        try:
            yield from iter(lambda: result.cursor.fetchmany(size), [])
        finally:
            result.close()
        return
    with conn.execute(query, execution_options={"yield_per": size}) as streamed:
        for part in streamed.partitions():
            yield [tuple(row) for row in part]


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
    stored_task = type_coerce(scores.c.task_id, Text)  # as stored: unescaped below
    query = (
        select(stored_task, scores.c.value, func.count().label("n"))
        .where(scores.c.run_id == run_id, scores.c.value.is_not(None))
        .group_by(scores.c.task_id, scores.c.value)
    )
    # Summed exactly as numerator / denominator (a power of two) per denominator: a few
    # denominators per task, and small integers until the end.
    parts: dict[str, dict[int, int]] = {}
    counts: dict[str, int] = {}
    rows_of = (row for batch in _driver_batches(conn, query, _SPAN_BATCH) for row in batch)
    for task_id, value, n in rows_of:
        try:
            numerator, denominator = value.as_integer_ratio()
        except (AttributeError, ValueError, OverflowError):  # not a number, or not finite:
            continue  # a value changed behind trialkit's back is no score
        by_denominator = parts.setdefault(task_id, {})
        by_denominator[denominator] = by_denominator.get(denominator, 0) + numerator * n
        counts[task_id] = counts.get(task_id, 0) + n
    return {
        unescape_nul(task): (
            sum(m * (_EXACT_SCALE // d) for d, m in by_denominator.items()),
            counts[task],
        )
        for task, by_denominator in parts.items()
    }


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
    try:
        return float(values[0] + (values[-1] - values[0]) * (position - low))
    except TypeError:  # a duration that is no number (changed behind trialkit's back)
        return None


_TASKS_PER_UNION = 200
"""Tasks per query when reading listed trials: a UNION ALL of one indexed seek per task
(SQLite allows 500 terms; its planner does not seek for a row-value IN list)."""


def _listed(
    conn: Connection, run_id: str, tasks: set[str], max_results: int
) -> dict[str, list[TrialResult]]:
    """Per task of `tasks`: its first `max_results` non-passing trials, by trial number."""
    found = _listed_rows(conn, run_id, tasks, max_results)
    return {task: [rows.trial_result(row, run_id) for row in got] for task, got in found.items()}


def _listed_rows(
    conn: Connection, run_id: str, tasks: set[str], max_results: int
) -> dict[str, list[rows.StoredRow]]:
    """The rows of `_listed`, by trial number."""
    if max_results <= 0 or not tasks:
        return {}
    # Their numbers first, from the covering index: for the whole run at once, or for a few
    # tasks (a batch of a streamed report) by their ids.
    not_passed = select(trials.c.task_id, trials.c.idx).where(
        trials.c.run_id == run_id, trials.c.verdict.in_(_NOT_PASSED)
    )
    if len(tasks) <= _TASKS_PER_QUERY:
        not_passed = not_passed.where(trials.c.task_id.in_(sorted(tasks)))
    numbers: dict[str, list[int]] = {}
    for task_id, idx in conn.execute(not_passed):
        if task_id in tasks:
            numbers.setdefault(task_id, []).append(idx)
    wanted = [(task, heapq.nsmallest(max_results, keys)) for task, keys in numbers.items()]
    found: dict[str, list[rows.StoredRow]] = {}
    columns = _result_columns()
    for start in range(0, len(wanted), _TASKS_PER_UNION):
        chunk = wanted[start : start + _TASKS_PER_UNION]
        query = union_all(
            *(
                columns.where(
                    trials.c.run_id == run_id, trials.c.task_id == task, trials.c.idx.in_(keys)
                )
                for task, keys in chunk
            )
        )
        for row in conn.execute(query):
            found.setdefault(row.task_id, []).append(row)
    for got in found.values():
        got.sort(key=_trial_number)
    return found


def with_listed(conn: Connection, kept: Report, max_results: int) -> Report | None:
    """`kept` (a report made with `max_results=0`, see `kept_reports`) with the trials each
    task lists at `max_results`, as `load_report` picks them (`listed_results`). Only those
    trials are read: the figures are the kept ones. `None` when a listed trial's row cannot
    be read (changed behind trialkit's back since the report was kept): the figures kept
    would not count it as the error it is now."""
    found = listed_results(conn, kept.run.id, {t.id: t.trials for t in kept.tasks}, max_results)
    if found is None:
        return None
    tasks = []
    for task in kept.tasks:
        listed = found.get(task.id, [])
        update = {"results": listed, "results_omitted": task.trials - len(listed)}
        tasks.append(task.model_copy(update=update))
    return kept.model_copy(update={"tasks": tasks})


def listed_results(
    conn: Connection, run_id: str, tasks: Mapping[str, int], max_results: int
) -> dict[str, list[TrialResult]] | None:
    """The trials a report lists for each of `tasks` (task id: its trial count), by trial
    number (`listed_rows`). `None` when the row of one cannot be read (`rows.unreadable_row`)."""
    found = {
        task: [rows.trial_result(row, run_id) for row in got]
        for task, got in listed_rows(conn, run_id, tasks, max_results).items()
    }
    for results in found.values():
        if any(r.error is not None and r.error.type == rows.STORED_ROW_ERROR for r in results):
            return None
    return found


def listed_rows(
    conn: Connection, run_id: str, tasks: Mapping[str, int], max_results: int
) -> dict[str, list[rows.StoredRow]]:
    """The rows (`_result_columns`) of the trials a report lists for each of `tasks` (task
    id: its trial count), by trial number: every trial of a task of at most `max_results`,
    else its first `max_results` non-passing ones."""
    small = [task for task, n in tasks.items() if 0 < n <= max_results]
    big = {task for task, n in tasks.items() if n > max_results}
    found: dict[str, list[rows.StoredRow]] = {}
    for start in range(0, len(small), _TASKS_PER_QUERY):
        chunk = small[start : start + _TASKS_PER_QUERY]
        query = _result_columns().where(trials.c.run_id == run_id, trials.c.task_id.in_(chunk))
        for row in conn.execute(query):
            found.setdefault(row.task_id, []).append(row)
    found |= _listed_rows(conn, run_id, big, max_results)
    return {task: sorted(got, key=_trial_number)[:max_results] for task, got in found.items()}


def _trial_number(row: rows.StoredRow) -> int:
    """A row's trial number to sort by (one that is none, changed behind trialkit's back,
    first)."""
    return row.idx if isinstance(row.idx, int) else -1


def _results(
    conn: Connection, query: Select[Any] | CompoundSelect[Any], run_id: str
) -> dict[str, list[TrialResult]]:
    found: dict[str, list[TrialResult]] = {}
    for row in conn.execute(query):
        found.setdefault(row.task_id, []).append(rows.trial_result(row, run_id))
    return found
