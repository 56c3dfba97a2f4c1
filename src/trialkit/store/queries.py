"""Read-only queries that select only the columns they show: no transcript JSON is loaded.

`trialkit transcripts list` stays fast on large stores because one row per trial comes from
one SQL query, with the first non-passing check found by the database. It reads only narrow
columns that come before the wide JSON ones in a row (SQLite walks a wide value's overflow
pages to reach the columns after it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, func, select

from trialkit._record import ErrorInfo, Record
from trialkit.report import TaskPlan
from trialkit.score import Verdict
from trialkit.store import rows
from trialkit.store.encoding import SafeText
from trialkit.store.schema import run_tasks, runs, scores, trials
from trialkit.store.store import Store
from trialkit.trial import TrialStatus

RATIONALE_CHARS = 300
"""How much of a check's rationale a listing reads (the full text is in `transcripts show`)."""


class TrialLine(Record):
    """One row of `trialkit transcripts list`: a trial without its transcript."""

    run_id: str
    task_id: str
    index: int
    verdict: Verdict
    status: TrialStatus
    failed: bool
    """The agent raised or reported failure."""
    started_at: datetime | None
    """`None` only when its stored value cannot be read (the trial is then an error)."""
    duration_s: float
    input_tokens: int
    """The agent's input tokens (0 when no model call was recorded)."""
    output_tokens: int
    cost_usd: float | None
    """Agent and graders together; `None` when unknown."""
    check: str | None = None
    """The name of the trial's first check that did not pass."""
    check_verdict: Verdict | None = None
    rationale: str | None = None
    """That check's rationale, cut at `RATIONALE_CHARS` characters."""
    error: ErrorInfo | None = None
    """Why the trial errored (setup, agent, capture or timeout)."""


class TrialListing(Record):
    """The rows a listing shows and how many rows matched before `limit`."""

    lines: list[TrialLine]
    total: int


@contextmanager
def _read(store: Store, action: str) -> Iterator[Connection]:
    # Store has no public connection API yet; its `_read` gives one read transaction and turns
    # database errors into one-line `StoreError`s.
    with store._read(action) as conn:
        yield conn


def latest_run_id(store: Store) -> str | None:
    """The id of the run that started last, or `None` when the store has none."""
    query = select(runs.c.id).order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(1)
    with _read(store, "find the latest run") as conn:
        found = conn.scalar(query)
    return None if found is None else str(found)


def run_name(store: Store, run_id: str) -> str | None:
    with _read(store, f"read run {run_id!r}") as conn:
        name = conn.scalar(select(runs.c.name).where(runs.c.id == run_id))
    return None if name is None else str(name)


def oldest_first(store: Store, run_ids: Sequence[str]) -> list[str]:
    """`run_ids` in the order the runs started (ids not in the store are left out)."""
    query = (
        select(runs.c.id).where(runs.c.id.in_(list(run_ids))).order_by(runs.c.started_at, runs.c.id)
    )
    with _read(store, "order runs by start") as conn:
        return [str(found) for found in conn.scalars(query)]


def task_ids(store: Store, run_id: str) -> list[str]:
    """The tasks planned for a run, in the suite's order."""
    query = (
        select(run_tasks.c.task_id)
        .where(run_tasks.c.run_id == run_id)
        .order_by(run_tasks.c.position)
    )
    with _read(store, f"list the tasks of run {run_id!r}") as conn:
        return [str(task_id) for task_id in conn.scalars(query)]


def task_plan(store: Store, run_id: str, task_id: str) -> TaskPlan | None:
    """One task's plan in a run (with its reference and criteria), or `None` when the run did
    not plan it."""
    query = select(run_tasks).where(run_tasks.c.run_id == run_id, run_tasks.c.task_id == task_id)
    with _read(store, f"read task {task_id!r} of run {run_id!r}") as conn:
        row = conn.execute(query).one_or_none()
        return None if row is None else rows.task_plan(row)


def trial_indices(store: Store, run_id: str, task_id: str) -> list[int]:
    """The trial numbers stored for one task of a run, in order."""
    query = (
        select(trials.c.idx)
        .where(trials.c.run_id == run_id, trials.c.task_id == task_id)
        .order_by(trials.c.idx)
    )
    with _read(store, f"list the trials of {task_id!r} in run {run_id!r}") as conn:
        return [int(index) for index in conn.scalars(query)]


def list_trials(
    store: Store,
    run_id: str,
    *,
    tasks: Sequence[str] | None = None,
    verdict: Verdict | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> TrialListing:
    """The trials of a run in the suite's task order, then by trial number.

    `tasks` keeps only those task ids; `verdict` only trials with that verdict; `offset`
    skips that many rows first (`total` counts them all, unless `offset` skips every row).
    """
    key = (
        trials.c.run_id == scores.c.run_id,
        trials.c.task_id == scores.c.task_id,
        trials.c.idx == scores.c.trial_idx,
    )
    first_position = (
        select(func.min(scores.c.position))
        .where(*key, scores.c.verdict != Verdict.PASS.value)
        .correlate(trials)
        .scalar_subquery()
    )
    check = scores.alias("check_score")
    check_key = and_(
        check.c.run_id == trials.c.run_id,
        check.c.task_id == trials.c.task_id,
        check.c.trial_idx == trials.c.idx,
        check.c.position == first_position,
    )
    query = (
        select(
            trials.c.run_id,
            trials.c.task_id,
            trials.c.idx,
            trials.c.verdict,
            trials.c.status,
            trials.c.failed,
            trials.c.started_at,
            trials.c.duration_s,
            trials.c.input_tokens,
            trials.c.output_tokens,
            trials.c.cost_usd,
            trials.c.error,
            check.c.name.label("check"),
            check.c.verdict.label("check_verdict"),
            func.substr(check.c.rationale, 1, RATIONALE_CHARS + 1, type_=SafeText).label(
                "rationale"
            ),
            func.count().over().label("total"),
        )
        .select_from(
            trials.outerjoin(
                run_tasks,
                and_(
                    run_tasks.c.run_id == trials.c.run_id, run_tasks.c.task_id == trials.c.task_id
                ),
            ).outerjoin(check, check_key)
        )
        .where(trials.c.run_id == run_id)
        .order_by(run_tasks.c.position, trials.c.task_id, trials.c.idx)
    )
    if tasks is not None:
        query = query.where(trials.c.task_id.in_(list(tasks)))
    if verdict is not None:
        query = query.where(trials.c.verdict == verdict.value)
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    with _read(store, f"list the trials of run {run_id!r}") as conn:
        found = conn.execute(query).all()
    total = int(found[0].total) if found else 0
    return TrialListing(lines=[_line(row) for row in found], total=total)


def _line(row: rows.StoredRow) -> TrialLine:
    rationale = row.rationale
    if rationale is not None and len(rationale) > RATIONALE_CHARS:
        rationale = rationale[:RATIONALE_CHARS] + "…"
    try:
        return _trial_line(row, rationale)
    except rows.CORRUPTION_ERRORS:
        return _unreadable_line(row, rationale)


_LINE_READERS: dict[str, Callable[[Any], Any]] = {
    "verdict": Verdict,
    "status": TrialStatus,
    "started_at": rows.load_datetime,
    "check_verdict": lambda value: _optional_verdict(value),
    "error": lambda value: _error(value),
}


def _trial_line(row: rows.StoredRow, rationale: str | None) -> TrialLine:
    return TrialLine(
        run_id=row.run_id,
        task_id=row.task_id,
        index=row.idx,
        verdict=Verdict(row.verdict),
        status=TrialStatus(row.status),
        failed=row.failed,
        started_at=rows.load_datetime(row.started_at),
        duration_s=row.duration_s,
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cost_usd=row.cost_usd,
        check=row.check,
        check_verdict=_optional_verdict(row.check_verdict),
        rationale=rationale,
        error=_error(row.error),
    )


def _unreadable_line(row: rows.StoredRow, rationale: str | None) -> TrialLine:
    """A trial whose row cannot be read, as an error line naming the column that is wrong (as
    reports show it, `rows.unreadable_row`); what can be read is kept."""
    problems: list[tuple[str, str]] = []
    read: dict[str, Any] = {}
    for column, decode in _LINE_READERS.items():
        try:
            read[column] = decode(getattr(row, column))
        except rows.CORRUPTION_ERRORS as exc:
            problems.append((column, rows.describe_corruption(exc)))
    numbers: dict[str, Any] = {}
    for column, default in _LINE_NUMBERS.items():
        value = getattr(row, column)
        try:
            numbers[column] = None if value is None and default is None else rows.as_number(value)
        except rows.CORRUPTION_ERRORS as exc:
            problems.append((column, rows.describe_corruption(exc)))
            numbers[column] = default
    try:
        failed = rows.as_flag(row.failed)
    except rows.CORRUPTION_ERRORS as exc:
        problems.append(("failed", rows.describe_corruption(exc)))
        failed = False
    if not problems:  # each column reads, but not together
        problems.append(("row", "its values do not make a trial"))
    return TrialLine(
        run_id=str(row.run_id),
        task_id=str(row.task_id),
        index=row.idx if isinstance(row.idx, int) else -1,
        verdict=Verdict.ERROR,
        status=TrialStatus.ERROR,
        failed=failed,
        started_at=read.get("started_at"),
        **numbers,
        check=row.check,
        check_verdict=read.get("check_verdict"),
        rationale=rationale,
        error=rows.unreadable_error(problems),
    )


_LINE_NUMBERS: dict[str, int | float | None] = {
    "duration_s": 0.0,
    "input_tokens": 0,
    "output_tokens": 0,
    "cost_usd": None,
}
"""The numeric columns of a listed trial, and what one that is not a number is shown as."""


def _optional_verdict(value: str | None) -> Verdict | None:
    return None if value is None else Verdict(value)


def _error(value: str | None) -> ErrorInfo | None:
    return None if value is None else ErrorInfo.model_validate_json(value)
