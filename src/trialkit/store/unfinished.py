"""Trials a run planned that never finished: found from the plan the store keeps, and stored
as errors.

A run records how many trials each task is to run (`run_tasks.trials`). When the process that
ran some of them died (a pytest-xdist worker that crashed, a process killed), the trials it
had in hand were never saved: the run would read as if they had never been planned (a task
"pass 1/1" of 2). Whoever ends such a run (the pytest plugin's controller) stores each as an
**error** trial saying why (`TrialNotFinished`), so every report, the viewer and
`trialkit report` count it as one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import select

from trialkit._record import ErrorInfo
from trialkit.score import Verdict
from trialkit.store.schema import run_tasks, trials
from trialkit.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from trialkit.store.store import Store

UNFINISHED_ERROR = "TrialNotFinished"
"""The `ErrorInfo.type` of a planned trial that never finished."""


@dataclass(frozen=True)
class Unfinished:
    """A planned task with trials not stored: how many it planned, which are missing."""

    task_id: str
    planned: int
    stored: int
    missing: tuple[int, ...]
    expect: str


def unfinished_tasks(store: Store, run_id: str) -> dict[str, Unfinished]:
    """The tasks of run `run_id` with fewer trials stored than planned, in the suite's order
    (tasks whose plan is not known, or was adaptive, are not among them)."""
    plans = (
        select(run_tasks.c.task_id, run_tasks.c.trials, run_tasks.c.expect)
        .where(run_tasks.c.run_id == run_id, run_tasks.c.trials.is_not(None))
        .order_by(run_tasks.c.position)
    )
    stored = select(trials.c.task_id, trials.c.idx).where(trials.c.run_id == run_id)
    with store._read(f"find the unfinished trials of run {run_id!r}") as conn:
        store._run_row(conn, run_id)
        planned = [(row.task_id, int(row.trials), str(row.expect)) for row in conn.execute(plans)]
        done: dict[str, set[int]] = {}
        for task_id, idx in conn.execute(stored):
            done.setdefault(task_id, set()).add(idx)
    found: dict[str, Unfinished] = {}
    for task_id, count, expect in planned:
        have = done.get(task_id, set())
        missing = tuple(i for i in range(count) if i not in have)
        if missing:
            found[task_id] = Unfinished(task_id, count, len(have), missing, expect)
    return found


def store_unfinished(
    store: Store, run_id: str, tasks: Mapping[str, Unfinished], reasons: Mapping[str, str]
) -> int:
    """Store each missing trial of `tasks` whose task has a reason in `reasons` as an error
    trial whose message is that reason; returns how many were stored."""
    now = datetime.now(UTC)
    lost = [
        Trial(
            run_id=run_id,
            task_id=task.task_id,
            index=index,
            status=TrialStatus.ERROR,
            verdict=Verdict.ERROR,
            expect="failure" if task.expect == "failure" else "success",
            error=ErrorInfo(type=UNFINISHED_ERROR, message=reasons[task.task_id], phase="worker"),
            started_at=now,
            duration_s=0.0,
        )
        for task in tasks.values()
        if task.task_id in reasons
        for index in task.missing
    ]
    if lost:
        store.save_trials(lost)
    return len(lost)
