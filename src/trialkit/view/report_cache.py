"""Reports of runs kept between the viewer's requests, while the run stays as it was.

A run's report is computed by the database (`Store.load_report`), in seconds on a run of
100,000 trials; a run that has finished changes only when trials are resumed or retried, or
labels are given. Its version is read first, cheaply (the run's status and end, its trial
count, its labels' count and latest time, from indexes): a cached report of the same version
is served as is, any other is computed again. A running run is never cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from sqlalchemy import func, select

from trialkit.report import Report
from trialkit.store import Store
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
        """The report of stored run `run_id`, computed again only when the run changed."""
        version = run_version(store, run_id)
        with self._lock:
            kept = self._kept.get(run_id)
            if kept is not None and kept[0] == version:
                self._kept.move_to_end(run_id)
                return kept[1]
        report = store.load_report(run_id)
        if report.run.status != "running":
            with self._lock:
                self._kept[run_id] = (version, report)
                self._kept.move_to_end(run_id)
                while len(self._kept) > self.size:
                    self._kept.popitem(last=False)
        return report


def run_version(store: Store, run_id: str) -> Version:
    """What changes when the report of `run_id` would: status, end, trials and labels."""
    with store._read(f"read run {run_id!r}") as conn:
        run = conn.execute(
            select(runs.c.status, runs.c.finished_at).where(runs.c.id == run_id)
        ).one_or_none()
        count = conn.scalar(select(func.count()).where(trials.c.run_id == run_id))
        labelled = conn.execute(
            select(func.count(), func.max(labels.c.labeled_at)).where(labels.c.run_id == run_id)
        ).one()
    return (None if run is None else tuple(run), count, tuple(labelled))
