"""Reports of runs (and figures of suites) kept between the viewer's requests, while the runs
stay as they were.

A run's report is the one `Store.load_report` keeps for a finished run, or computes from the
store's aggregates (a few hundred milliseconds on a run of 100,000 trials), without the trials
a report lists per task (the run page reads those for its own tasks,
`trial_pages.listed_trials`). A run that has finished changes only when trials are resumed
or retried, or labels are given. Its version is read first, cheaply
(the run's status and end, its trial count, its labels' count and latest time, from
indexes): a cached report of the same version is served as is, any other is computed again.
A running run is never cached. A suite's figures over its runs (its trend page) are kept the
same way, under the version of all its runs together.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select

from trialkit.report import Report
from trialkit.store import Store, kept_reports
from trialkit.store.schema import labels, runs, trials

KEPT = 8
"""Reports kept at once, the most recently used."""

Version = tuple[object, ...]


class ReportCache:
    """The last `size` reports served, each with the version of the run it was made from."""

    def __init__(self, size: int = KEPT) -> None:
        self.size = size
        self._kept: OrderedDict[str, tuple[Version, Report]] = OrderedDict()
        self._lock = threading.Lock()

    def report(self, store: Store, run_id: str) -> Report:
        """The report of stored run `run_id` (its tasks list no trials), computed again only
        when the run changed."""
        version = run_version(store, run_id)
        with self._lock:
            kept = self._kept.get(run_id)
            if kept is not None and kept[0] == version:
                self._kept.move_to_end(run_id)
                return kept[1]
        report = store.load_report(run_id, max_results=0, version=version[0])
        if report.run.status != "running":
            with self._lock:
                self._kept[run_id] = (version, report)
                self._kept.move_to_end(run_id)
                while len(self._kept) > self.size:
                    self._kept.popitem(last=False)
        return report


def run_version(store: Store, run_id: str) -> tuple[str | None]:
    """What changes when the report of `run_id` would: status, end, trials and labels (and
    the report code's version), as `kept_reports` reads it."""
    with store._read(f"read run {run_id!r}") as conn:
        return (kept_reports.run_version(conn, run_id),)


class SuiteCache:
    """What `compute(store)` gave for a suite, kept while none of the suite's runs changed
    (runs added, finished or resumed, trials stored, labels given) and none is running."""

    def __init__(self, size: int = KEPT) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[str, str], tuple[Version, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, store: Store, suite_id: str, key: str, compute: Callable[[Store], Any]) -> Any:
        version = suite_version(store, suite_id)
        with self._lock:
            kept = self._kept.get((suite_id, key))
            if kept is not None and kept[0] == version:
                self._kept.move_to_end((suite_id, key))
                return kept[1]
        value = compute(store)
        if not version[0]:  # no run of the suite is running
            with self._lock:
                self._kept[(suite_id, key)] = (version, value)
                while len(self._kept) > self.size:
                    self._kept.popitem(last=False)
        return value


def suite_version(store: Store, suite_id: str) -> Version:
    """Whether a run of the suite is running, then what changes when its runs do."""
    of_suite = select(runs.c.id).where(runs.c.suite_id == suite_id)
    with store._read(f"read the runs of suite {suite_id!r}") as conn:
        running = conn.scalar(
            select(func.count()).where(runs.c.suite_id == suite_id, runs.c.status == "running")
        )
        listed = conn.execute(
            select(func.count(), func.max(runs.c.started_at), func.max(runs.c.finished_at)).where(
                runs.c.suite_id == suite_id
            )
        ).one()
        count = conn.scalar(select(func.count()).where(trials.c.run_id.in_(of_suite)))
        labelled = conn.execute(
            select(func.count(), func.max(labels.c.labeled_at)).where(labels.c.run_id.in_(of_suite))
        ).one()
    return (bool(running), tuple(listed), count, tuple(labelled))
