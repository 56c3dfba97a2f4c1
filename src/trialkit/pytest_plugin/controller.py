"""The end of a pytest-xdist session, in the process that started the workers (the controller).

Each worker hands back what it ran when it ends (`workeroutput`); a worker that crashed (killed,
`os._exit`, a segfault) hands back nothing, and the trials it had in hand were never saved.
So the controller does not trust the workers' word for what ran:

- it finds every run this session stored, from the store itself (their ids start with the
  session's stamp, and their config carries the session's tag), so a suite only a crashed
  worker ran is ended too;
- it stores each planned trial that never finished as an error (`store.unfinished`), saying
  why: the worker running it crashed (the tasks xdist reports crashed are matched to their
  runs by node id), or it ended before the trial did;
- and it takes the figures of every run from the store, so the terminal summary, the stored
  run, `trialkit report` and the viewer say the same.

Without a store (`--trialkit-store none`) the trials a crashed worker ran are lost: its
crashed task counts its missing trials as errors and a notice says what was lost.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from trialkit.report import Report
    from trialkit.store import Store

SESSION_KEY = "pytest_session"
"""The key of a run's config that holds the tag of the pytest session that ran it."""
_NOT_IN_ID = re.compile(r"[/#\x00-\x1f\x7f-\x9f]")  # as `marker.task_id` replaces


@dataclass(frozen=True)
class Crash:
    """A worker that crashed while running the item `nodeid`."""

    nodeid: str
    worker: str

    def reason(self) -> str:
        return (
            f"never finished: the pytest worker {self.worker} running it crashed "
            f"(worker {self.worker!r} crashed while running {self.nodeid!r})"
        )


NEVER_FINISHED = (
    "never finished: no result was stored for it (the pytest process running it ended "
    "before it did)"
)

Status = tuple[Any, str | None]


def crashed_task(
    crash: Crash, run_id: str, task_ids: Sequence[str], run_id_of: Callable[[str], str]
) -> str | None:
    """The task of run `run_id` that the item `crash.nodeid` ran, if it is one of its tasks.

    A task item's node id is its suite collector's (whose node id makes the run id) then
    `::TASK`; a marked test's is its module's then the rest, which makes the task id. Each
    place the id can be cut is tried, so no separator in an id misleads it."""
    nodeid = crash.nodeid
    start = 0
    while (cut := nodeid.find("::", start)) != -1:
        start = cut + 2
        if run_id_of(nodeid[:cut]) != run_id:
            continue
        rest = nodeid[cut + 2 :]
        for task_id in (rest, _NOT_IN_ID.sub("_", rest)):
            if task_id in task_ids:
                return task_id
    return None


def session_runs(store: Store, stamp: str, tag: str) -> list[str]:
    """The ids of the runs the pytest session of `stamp` and `tag` stored, oldest first."""
    import json

    from sqlalchemy import func, select

    from trialkit.store.schema import runs

    prefix = f"{stamp}-"
    query = (
        select(runs.c.id, runs.c.config)
        .where(func.substr(runs.c.id, 1, len(prefix)) == prefix)
        .order_by(runs.c.started_at, runs.c.id)
    )
    found = []
    with store._read("find the runs of this pytest session") as conn:
        for run_id, config in conn.execute(query):
            try:
                mine = json.loads(config).get(SESSION_KEY) == tag
            except (ValueError, AttributeError):  # not this session's (nor readable)
                continue
            if mine:
                found.append(str(run_id))
    return found


def finish_stored(
    store: Store,
    run_id: str,
    exitstatus: int,
    crashes: Sequence[Crash],
    run_id_of: Callable[[str], str],
    status_of: Callable[[int, Report], Status],
) -> tuple[Report, list[str]]:
    """End the stored run `run_id`: its planned trials that never finished stored as errors
    (unless pytest was interrupted, which ends the run `interrupted`), its status decided from
    the store. Returns its report and the notices to show."""
    from trialkit.run.session import finish_stored_run
    from trialkit.store.unfinished import store_unfinished, unfinished_tasks

    notices: list[str] = []
    if exitstatus != pytest.ExitCode.INTERRUPTED:
        unfinished = unfinished_tasks(store, run_id)
        reasons: dict[str, str] = {}
        for task in unfinished.values():
            crash = next(
                (c for c in crashes if crashed_task(c, run_id, [task.task_id], run_id_of)),
                None,
            )
            if crash is not None:
                reasons[task.task_id] = crash.reason()
            elif task.stored:  # begun, not ended: a task's trials run in one item
                reasons[task.task_id] = NEVER_FINISHED
        lost = store_unfinished(store, run_id, unfinished, reasons)
        if lost:
            notices.append(
                f"run {run_id}: {lost} trial{'s' if lost != 1 else ''} never finished "
                f"({', '.join(reasons)}): stored as errors"
            )
    status, reason = status_of(exitstatus, store.load_report(run_id, max_results=0))
    return finish_stored_run(store, run_id, status=status, reason=reason), notices


def finish_unstored(
    data: dict[str, Any],
    exitstatus: int,
    crashes: Sequence[Crash],
    run_id_of: Callable[[str], str],
    status_of: Callable[[int, Report], Status],
) -> tuple[Report, list[str]]:
    """The report of a run nothing stored, from what its workers handed back: a crashed
    task's missing trials are errors; what a crashed worker ran before is lost (said)."""
    from trialkit._record import ErrorInfo
    from trialkit.report import RunInfo, SuiteInfo, TaskPlan, TrialResult, build_report
    from trialkit.score import Verdict
    from trialkit.trial import TrialStatus

    run = RunInfo.model_validate(data["run"])
    plans = [TaskPlan.model_validate(p) for p in data["plans"]]
    results = {
        task: [TrialResult.model_validate(r) for r in found]
        for task, found in data["results"].items()
    }
    notices: list[str] = []
    for crash in crashes:
        task_id = crashed_task(crash, run.id, [p.id for p in plans], run_id_of)
        plan = next((p for p in plans if p.id == task_id), None)
        if plan is None:
            continue
        have = {r.trial for r in results.get(plan.id, [])}
        error = ErrorInfo(type="TrialNotFinished", message=crash.reason(), phase="worker")
        results.setdefault(plan.id, []).extend(
            TrialResult(trial=i, verdict=Verdict.ERROR, status=TrialStatus.ERROR, error=error)
            for i in range(plan.trials or 1)
            if i not in have
        )
        notices.append(
            f"run {run.id}: worker {crash.worker} crashed while running {crash.nodeid}; "
            "the trials it ran are lost (nothing is stored: --trialkit-store none)"
        )
    report = build_report(run, SuiteInfo.model_validate(data["suite"]), plans, results)
    if crashes and exitstatus != pytest.ExitCode.INTERRUPTED:  # its tasks ran: none stopped
        report.run.status = "completed"
    else:
        status, reason = status_of(exitstatus, report)
        report.run.status = status
        if reason is not None:
            report.run.config["stop_reason"] = reason
    report.run.finished_at = datetime.now(UTC)
    return report, notices
