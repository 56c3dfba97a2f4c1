"""How far a run has got, from SQL: its counts so far and the trials that finished lately.

The live pages of the viewer poll `run_progress(store, run_id, after=N)`: counts come from a
`GROUP BY`, and the trials are one page of them in the order they finished, so a run of any
size costs the same to follow.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import TypeAdapter
from sqlalchemy import Connection, func, select

from trialkit._record import Record
from trialkit.score import Verdict
from trialkit.store.rows import CORRUPTION_ERRORS, as_number
from trialkit.store.schema import run_tasks, trials
from trialkit.store.store import Store
from trialkit.trial import TrialStatus

TRIALS_PER_POLL = 100
"""The most trials one answer lists; the next poll gets the rest."""
PLANNED_KEY = "planned_trials"
"""The key of a run's config that says how many trials it plans (at most, when adaptive)."""
_CONFIG = TypeAdapter(dict[str, Any])


class FinishedTrial(Record):
    """A trial of a run that finished: which one, and how it went."""

    task_id: str
    index: int
    verdict: Verdict
    status: TrialStatus
    duration_s: float


class RunProgress(Record):
    """A run's counts so far, and the trials that finished after the first `after`."""

    run_id: str
    status: Literal["running", "completed", "interrupted", "stopped"]
    planned: int | None
    """Trials the run plans (its most, with adaptive trials); `None` when the run did not
    record it."""
    done: int
    """Trials stored so far."""
    passed: int
    failed: int
    errors: int
    unknown: int
    after: int
    """How many finished trials the caller had seen (the `after` asked for)."""
    trials: list[FinishedTrial]
    """Finished trials `after`, `after + 1`, … in the order they finished (at most
    `TRIALS_PER_POLL`); poll again with `after + len(trials)` for the next ones."""


def run_progress(
    store: Store, run_id: str, *, after: int = 0, limit: int = TRIALS_PER_POLL
) -> RunProgress:
    """The counts of run `run_id` and its finished trials past the first `after`."""
    with store._read(f"read the progress of run {run_id!r}") as conn:
        row = store._run_row(conn, run_id)
        counts: dict[Verdict, int] = {}
        for verdict, n in conn.execute(
            select(trials.c.verdict, func.count())
            .where(trials.c.run_id == run_id)
            .group_by(trials.c.verdict)
        ):
            known = _VERDICTS.get(verdict, Verdict.ERROR)
            counts[known] = counts.get(known, 0) + int(n)
        finished = _finished(conn, run_id, after, limit) if limit > 0 else []
        planned = _planned(conn, run_id, _CONFIG.validate_json(row.config))
    return RunProgress(
        run_id=run_id,
        status=row.status,
        planned=planned,
        done=sum(counts.values()),
        passed=counts.get(Verdict.PASS, 0),
        failed=counts.get(Verdict.FAIL, 0),
        errors=counts.get(Verdict.ERROR, 0),
        unknown=counts.get(Verdict.UNKNOWN, 0),
        after=after,
        trials=finished,
    )


def _finished(conn: Connection, run_id: str, after: int, limit: int) -> list[FinishedTrial]:
    # In the order of `ix_trials_run_ended`: deep pages skip index entries, not sorted rows.
    query = (
        select(
            trials.c.task_id,
            trials.c.idx,
            trials.c.verdict,
            trials.c.status,
            trials.c.duration_s,
        )
        .where(trials.c.run_id == run_id)
        .order_by(trials.c.ended_at, trials.c.task_id, trials.c.idx)
        .offset(after)
        .limit(limit)
    )
    return [_finished_trial(r) for r in conn.execute(query)]


def _finished_trial(row: Any) -> FinishedTrial:
    """A finished trial; one whose row was changed behind trialkit's back (a verdict, status
    or duration that is none) is an error, as reports show it."""
    verdict, status = _VERDICTS.get(row.verdict), _STATUSES.get(row.status)
    try:
        duration = as_number(row.duration_s)
    except CORRUPTION_ERRORS:
        duration = None
    if verdict is None or status is None or duration is None:
        verdict, status = Verdict.ERROR, TrialStatus.ERROR
    return FinishedTrial(
        task_id=row.task_id,
        index=row.idx,
        verdict=verdict,
        status=status,
        duration_s=duration or 0.0,
    )


_VERDICTS = {v.value: v for v in Verdict}
_STATUSES = {s.value: s for s in TrialStatus}


def _planned(conn: Connection, run_id: str, config: dict[str, Any]) -> int | None:
    """The run's recorded plan; for a run recorded before it was kept, its tasks times its
    `--trials` when that was given."""
    planned = config.get(PLANNED_KEY)
    if isinstance(planned, int):
        return planned
    per_task = config.get("trials")
    if not isinstance(per_task, int):
        return None
    tasks = conn.scalar(select(func.count()).where(run_tasks.c.run_id == run_id))
    return int(tasks or 0) * per_task
