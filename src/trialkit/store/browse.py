"""What the web viewer shows of a store, one page at a time, from SQL.

Every function reads narrow columns and covering indexes and returns records, never a whole
run: a page of runs, a suite's trend, a suite's task history strip, a tasks × runs matrix.
Figures equal those of `Store.load_report` (see `run_figures.py`). The matrix is in
`run_matrix.py`, a page of a run's trials in `trial_pages.py`; a suite's health findings are
`trialkit.analysis.health.suite_health(store, suite_id)`, re-exported here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter
from sqlalchemy import (
    JSON,
    TIMESTAMP,
    ColumnElement,
    Connection,
    Float,
    Integer,
    case,
    cast,
    func,
    select,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB

from trialkit._record import Record
from trialkit.analysis.health import suite_health
from trialkit.score import Verdict
from trialkit.store import aggregates, rows
from trialkit.store.encoding import SafeText
from trialkit.store.run_figures import RunFigures, planned_counts, run_figures
from trialkit.store.run_matrix import OUTPUT_CHARS, Matrix, MatrixCell, MatrixRow, matrix
from trialkit.store.schema import runs, trials
from trialkit.store.store import Store

RunSort = Literal[
    "started_at",
    "pass_rate",
    "cost",
    "duration",
    "errors",
    "name",
    "suite",
    "id",
    "model",
    "status",
]
_CONFIG = TypeAdapter(dict[str, Any])


class RunRow(Record):
    """One run of a page of runs, with its report's headline figures."""

    id: str
    name: str | None
    suite_id: str
    suite_kind: str
    model: str | None
    """The run's model setting, else the model its first task's trials name."""
    harness: str | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    duration_s: float | None
    """From its start to its end; `None` while it runs."""
    tasks: int
    trials: int
    passed: int
    """Passed trials."""
    failed: int
    errors: int
    pass_rate: float | None
    """Passed over decided trials, as its report's summary."""
    pass_rate_ci: tuple[float, float] | None
    """The Wilson interval of the report."""
    k: int | None
    """The largest k the report gives pass^k for (the trials per task, when none errored)."""
    pass_hat_k: float | None
    """pass^k at `k`, as the report's `pass_hat_k[k]`."""
    cost_usd: float | None
    """Agent and graders, as the report's summary; `None` when a cost is unknown."""
    mean_latency_s: float | None
    """Mean trial duration."""


class RunPage(Record):
    rows: list[RunRow]
    total: int
    """Runs matching the filters, before `offset` and `limit`."""


class Facets(Record):
    """The distinct values a store's runs have, for filter choices; each sorted."""

    suites: list[str]
    models: list[str]
    names: list[str]
    statuses: list[str]


class TrendPoint(Record):
    """One run of a suite's trend."""

    run_id: str
    name: str | None
    started_at: datetime
    model: str | None
    trials: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None
    pass_rate_ci: tuple[float, float] | None
    k: int | None
    pass_hat_k: float | None
    cost_usd: float | None
    mean_latency_s: float | None
    latency_p50_s: float | None
    """As the report's summary."""
    latency_p95_s: float | None


class TaskStrip(Record):
    task_id: str
    verdicts: list[Verdict | None]
    """The task's verdict in each run of `TaskHistory.runs`; `None` where it was not planned."""


class TaskHistory(Record):
    suite_id: str
    runs: list[str]
    """The suite's last runs, oldest first."""
    tasks: list[TaskStrip]
    """Tasks of the latest run in its order, then those only older runs had."""


@contextmanager
def _read(store: Store, action: str) -> Iterator[Connection]:
    # Store has no public connection API; `_read` gives one read transaction and turns
    # database errors into one-line `StoreError`s (as `store/queries.py` does).
    with store._read(action) as conn:
        yield conn


def _config_text(conn: Connection, key: str) -> ColumnElement[Any]:
    """A text field of a run's config (JSON text), read by the database."""
    if conn.dialect.name == "postgresql":
        found: ColumnElement[Any] = cast(runs.c.config, JSONB)[key].astext
    else:
        found = type_coerce(runs.c.config, JSON)[key].as_string()
    return found


def _model(conn: Connection) -> ColumnElement[Any]:
    """The run's model setting, else a model its first task's trials name (as health reads
    it): bounded by one task's trials, however big the run."""
    first = trials.alias("first_trials")
    first_task = (
        select(func.min(first.c.task_id))
        .where(first.c.run_id == runs.c.id)
        .correlate(runs)
        .scalar_subquery()
    )
    named = (
        select(trials.c.model)
        .where(
            trials.c.run_id == runs.c.id,
            trials.c.task_id == first_task,
            trials.c.model.is_not(None),
        )
        .correlate(runs)
        .limit(1)
        .scalar_subquery()
    )
    return func.coalesce(_config_text(conn, "model"), named, type_=SafeText)


def _duration(conn: Connection) -> ColumnElement[Any]:
    if conn.dialect.name == "postgresql":
        end = cast(runs.c.finished_at, _TIMESTAMPTZ)
        start = cast(runs.c.started_at, _TIMESTAMPTZ)
        return func.extract("epoch", end - start)
    # SQLite's date functions round to milliseconds, so whole seconds come from strftime of
    # the text up to the seconds and the microseconds from the rest (dump_datetime writes
    # fixed-width UTC text, "YYYY-MM-DDTHH:MM:SS.ffffff+00:00").
    return (_epoch_seconds(runs.c.finished_at) - _epoch_seconds(runs.c.started_at)) + (
        _microseconds(runs.c.finished_at) - _microseconds(runs.c.started_at)
    ) / 1_000_000.0


def _epoch_seconds(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(func.strftime("%s", func.substr(column, 1, 19)), Integer)


def _microseconds(column: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(func.substr(column, 21, 6), Integer)


_TIMESTAMPTZ = TIMESTAMP(timezone=True)


def list_runs(
    store: Store,
    *,
    suite: str | None = None,
    model: str | None = None,
    name: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    status: str | None = None,
    sort: RunSort = "started_at",
    descending: bool = True,
    offset: int = 0,
    limit: int = 50,
) -> RunPage:
    """A page of runs with their figures. `name` matches a substring (any case); `since` and
    `until` bound the start time (inclusive); a sort by a figure puts runs without one last,
    and ties are broken by start time, newest first."""
    with _read(store, "list runs") as conn:
        model_of = _model(conn).label("model")
        where: list[ColumnElement[bool]] = []
        if suite is not None:
            where.append(runs.c.suite_id == suite)
        if status is not None:
            where.append(runs.c.status == status)
        if name is not None:
            where.append(func.lower(runs.c.name).contains(name.lower(), autoescape=True))
        if since is not None:
            where.append(runs.c.started_at >= rows.dump_datetime(since, "since"))
        if until is not None:
            where.append(runs.c.started_at <= rows.dump_datetime(until, "until"))
        base = select(runs.c.id, model_of).where(*where)
        if model is not None:
            base = base.where(model_of == model)
        matched = base.subquery("matched")
        total = int(conn.scalar(select(func.count()).select_from(matched)) or 0)
        totals = _totals(matched) if sort in _FIGURE_SORTS else None
        if totals is not None:
            key = totals.c[sort]
        else:
            key = matched.c.model if sort == "model" else _sort_key(conn, sort)
        order = [key.is_(None), key.desc() if descending else key.asc()]
        joined = runs.join(matched, matched.c.id == runs.c.id)
        if totals is not None:
            joined = joined.outerjoin(totals, totals.c.run_id == runs.c.id)
        page = (
            select(runs, matched.c.model, _config_text(conn, "harness").label("harness"))
            .select_from(joined)
            .order_by(*order, runs.c.started_at.desc(), runs.c.id.desc())
            .offset(offset)
            .limit(limit)
        )
        found = conn.execute(page).all()
        configs = {row.id: _CONFIG.validate_json(row.config) for row in found}
        figures = run_figures(conn, configs)
    return RunPage(rows=[_run_row(row, figures[row.id]) for row in found], total=total)


_FIGURE_SORTS = ("pass_rate", "cost", "errors")


def _totals(matched: Any) -> Any:
    """Per matched run: its pass rate (the mean over tasks of each task's, as reports give
    it), errors and summed cost, to sort by (the figures shown are computed exactly, for the
    page's runs only)."""
    verdict = trials.c.verdict
    passed = func.sum(case((verdict == Verdict.PASS.value, 1), else_=0))
    decided = func.sum(case((verdict.in_([Verdict.PASS.value, Verdict.FAIL.value]), 1), else_=0))
    per_task = (
        select(
            trials.c.run_id,
            (cast(passed, Float) / func.nullif(decided, 0)).label("rate"),
            func.sum(case((verdict == Verdict.ERROR.value, 1), else_=0)).label("errors"),
            func.sum(trials.c.cost_usd).label("cost"),
        )
        .where(trials.c.run_id.in_(select(matched.c.id)))
        .group_by(trials.c.run_id, trials.c.task_id)
        .subquery("task_totals")
    )
    return (
        select(
            per_task.c.run_id,
            func.avg(per_task.c.rate).label("pass_rate"),  # AVG skips tasks with no rate
            func.sum(per_task.c.errors).label("errors"),
            func.sum(per_task.c.cost).label("cost"),
        )
        .group_by(per_task.c.run_id)
        .subquery("figure_totals")
    )


def _sort_key(conn: Connection, sort: RunSort) -> ColumnElement[Any]:
    if sort == "duration":
        return _duration(conn)
    columns = {"started_at": runs.c.started_at, "name": runs.c.name, "suite": runs.c.suite_id}
    return {**columns, "id": runs.c.id, "status": runs.c.status}[sort]


def _run_row(row: Any, figures: RunFigures) -> RunRow:
    times = rows.run_times(row)
    start, end = times["started_at"], times["finished_at"]
    assert start is not None
    return RunRow(
        id=row.id,
        name=row.name,
        suite_id=row.suite_id,
        suite_kind=row.suite_kind,
        model=row.model,
        harness=row.harness,
        status=row.status,
        started_at=start,
        finished_at=end,
        duration_s=None if end is None else (end - start).total_seconds(),
        tasks=figures.tasks,
        trials=figures.trials,
        passed=figures.passed,
        failed=figures.failed,
        errors=figures.errors,
        pass_rate=figures.pass_rate,
        pass_rate_ci=figures.pass_rate_ci,
        k=figures.k,
        pass_hat_k=figures.pass_hat_k,
        cost_usd=figures.cost_usd,
        mean_latency_s=figures.mean_latency_s,
    )


def facets(store: Store) -> Facets:
    """The suites, models, run names and statuses of the store's runs."""
    with _read(store, "list the facets of runs") as conn:

        def distinct(column: ColumnElement[Any]) -> list[str]:
            query = select(column.label("value")).distinct()
            return sorted(str(v) for v in conn.scalars(query) if v is not None)

        return Facets(
            suites=distinct(runs.c.suite_id),
            models=distinct(_model(conn)),
            names=distinct(runs.c.name),
            statuses=distinct(runs.c.status),
        )


def _suite_runs(conn: Connection, suite_id: str, limit: int) -> list[Any]:
    """The `limit` runs of a suite that started last, oldest first."""
    query = (
        select(
            runs.c.id, runs.c.name, runs.c.started_at, runs.c.config, _model(conn).label("model")
        )
        .where(runs.c.suite_id == suite_id)
        .order_by(runs.c.started_at.desc(), runs.c.id.desc())
        .limit(limit)
    )
    return list(conn.execute(query).all())[::-1]


def suite_trend(store: Store, suite_id: str, *, limit: int = 100) -> list[TrendPoint]:
    """The figures of a suite's last `limit` runs, oldest first."""
    with _read(store, f"read the trend of suite {suite_id!r}") as conn:
        found = _suite_runs(conn, suite_id, limit)
        figures = run_figures(conn, {row.id: _CONFIG.validate_json(row.config) for row in found})
        points = []
        for row in found:
            f = figures[row.id]
            p50, p95 = f.latencies or _latencies(conn, row.id, f.unplanned, f.trials)
            points.append(
                TrendPoint(
                    run_id=row.id,
                    name=row.name,
                    started_at=rows.load_datetime(row.started_at),
                    model=row.model,
                    trials=f.trials,
                    passed=f.passed,
                    failed=f.failed,
                    errors=f.errors,
                    pass_rate=f.pass_rate,
                    pass_rate_ci=f.pass_rate_ci,
                    k=f.k,
                    pass_hat_k=f.pass_hat_k,
                    cost_usd=f.cost_usd,
                    mean_latency_s=f.mean_latency_s,
                    latency_p50_s=p50,
                    latency_p95_s=p95,
                )
            )
    return points


def _latencies(
    conn: Connection, run_id: str, unplanned: frozenset[str], n: int
) -> tuple[float | None, float | None]:
    """The report's p50 and p95 of the run's trials of planned tasks (two index seeks)."""
    where: list[ColumnElement[bool]] = [trials.c.run_id == run_id]
    if unplanned:
        where.append(trials.c.task_id.not_in(sorted(unplanned)))
    return (
        aggregates._percentile(conn, where, n, 50),
        aggregates._percentile(conn, where, n, 95),
    )


def task_history(store: Store, suite_id: str, *, runs: int = 30) -> TaskHistory:
    """Each task's verdict in the suite's last `runs` runs: a history strip."""
    return task_history_and_counts(store, suite_id, runs=runs)[0]


VerdictCounts = dict[str, dict[str, Counter[Verdict]]]
"""{run id: {task id: its trials counted by verdict}}, tasks with trials only."""


def task_history_and_counts(
    store: Store, suite_id: str, *, runs: int = 30
) -> tuple[TaskHistory, VerdictCounts]:
    """`task_history`, and the verdict counts it was made from (which `suite_health` takes,
    so a page showing both groups the runs' trials once)."""
    with _read(store, f"read the task history of suite {suite_id!r}") as conn:
        found = _suite_runs(conn, suite_id, runs)
        run_ids = [row.id for row in found]
        planned = planned_counts(conn, run_ids)
    order: dict[str, None] = {}
    for run_id in reversed(run_ids):
        order |= dict.fromkeys(planned[run_id])
    strips = [
        TaskStrip(
            task_id=task_id,
            verdicts=[
                None if task_id not in planned[r] else planned[r][task_id].verdict()
                for r in run_ids
            ],
        )
        for task_id in order
    ]
    counts = {
        run_id: {
            task_id: Counter({v: n for v, n in task.verdicts.items() if n})
            for task_id, task in tasks.items()
            if task.trials
        }
        for run_id, tasks in planned.items()
    }
    return TaskHistory(suite_id=suite_id, runs=run_ids, tasks=strips), counts


__all__ = [
    "OUTPUT_CHARS",
    "Facets",
    "Matrix",
    "MatrixCell",
    "MatrixRow",
    "RunPage",
    "RunRow",
    "TaskHistory",
    "TaskStrip",
    "TrendPoint",
    "facets",
    "list_runs",
    "matrix",
    "suite_health",
    "suite_trend",
    "task_history",
    "task_history_and_counts",
]
