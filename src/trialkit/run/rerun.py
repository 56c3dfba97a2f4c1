"""`trialkit run --rerun RUN --only failed|errored|not-passed`: run again what did not pass.

The tasks are chosen by their verdict in the stored run RUN (DESIGN §2: a capability task
passes when one trial did, a regression task only when all did), read from the store's
aggregates without loading a trial. The new run is an ordinary run of the current suite with
those tasks selected, each with all its trials, and its config names the run it reran, so
`trialkit compare RUN NEW` reads as before and after. To finish the old run in place instead,
`--resume RUN --retry-errors` runs its errored trials again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Literal, get_args

from trialkit.score import Verdict
from trialkit.task import Suite, SuiteError

if TYPE_CHECKING:
    from trialkit.store import Store

RerunOnly = Literal["failed", "errored", "not-passed"]
RERUN_CHOICES: tuple[str, ...] = get_args(RerunOnly)

_CHOSEN: dict[str, frozenset[Verdict]] = {
    "failed": frozenset({Verdict.FAIL}),
    "errored": frozenset({Verdict.ERROR}),
    "not-passed": frozenset({Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN}),
}


def exact_pattern(task_id: str) -> str:
    """A `--task` pattern that matches `task_id` alone, even when it holds `*`, `?` or `[`."""
    return re.sub(r"([*?[])", r"[\1]", task_id)


def rerun_tasks(
    store: Store, run_id: str, only: RerunOnly, suite: Suite, within: Sequence[str] = ()
) -> list[str]:
    """The ids of the tasks of stored run `run_id` whose verdict `only` names, in the run's
    order; only those matching `within` (ids or globs) when given. Raises `SuiteError` when
    the run is of another suite, the suite lost one of those tasks, or none is chosen."""
    if only not in _CHOSEN:
        raise SuiteError(f"--only: expected one of {', '.join(RERUN_CHOICES)}, got {only!r}")
    report = store.load_report(run_id, max_results=0)
    if report.suite.id != suite.id:
        raise SuiteError(
            f"run {run_id!r} ran suite {report.suite.id!r}, not {suite.id!r}: "
            "rerun it with the suite it ran"
        )
    chosen = [t.id for t in report.tasks if t.verdict in _CHOSEN[only]]
    if within:
        chosen = [t for t in chosen if any(t == p or fnmatchcase(t, p) for p in within)]
    if not chosen:
        which = "" if not within else " among the selected tasks"
        raise SuiteError(f"run {run_id!r} has no {only} tasks{which}: nothing to rerun")
    have = {task.id for task in suite.tasks}
    gone = [t for t in chosen if t not in have]
    if gone:
        raise SuiteError(f"run {run_id!r} has tasks the suite no longer has: {', '.join(gone)}")
    return chosen
