"""What `trialkit run --resume` needs from the store: the run as planned and what it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Verdict
from trialkit.store import rows
from trialkit.store.schema import run_tasks, trials

if TYPE_CHECKING:
    from trialkit.store.store import Store


def load_run(store: Store, run_id: str) -> tuple[RunInfo, SuiteInfo, list[TaskPlan]]:
    """The run's record, its suite and its planned tasks, in their order."""
    with store._read(f"load run {run_id!r}") as conn:
        row = store._run_row(conn, run_id)
        plans = [
            rows.task_plan(task)
            for task in conn.execute(
                select(run_tasks).where(run_tasks.c.run_id == run_id).order_by(run_tasks.c.position)
            )
        ]
    return rows.run_info(row), rows.suite_info(row), plans


def stored_verdicts(store: Store, run_id: str) -> dict[tuple[str, int], Verdict]:
    """(task id, trial index) -> verdict of every trial the run holds (no transcripts read)."""
    query = select(trials.c.task_id, trials.c.idx, trials.c.verdict).where(
        trials.c.run_id == run_id
    )
    with store._read(f"list the trials of run {run_id!r}") as conn:
        # A verdict that is none (changed behind trialkit's back) is an error, as reports
        # show it: `--retry-errors` runs that trial again.
        verdicts = {v.value: v for v in Verdict}
        return {
            (r.task_id, r.idx): verdicts.get(r.verdict, Verdict.ERROR) for r in conn.execute(query)
        }
