"""A finished run's report, kept in the store beside the run (`run_reports`, m011_kept_reports).

A run's report changes only when the run does: trials stored (a resume, a retry), its end
recorded, labels given. Its version says all of that in one string, read from indexes in
a few milliseconds: the run's status and end, its trial count, its labels' count and latest
time, and the report code's own version (trialkit's, the report schema's), so an upgrade
never serves a report an older trialkit computed. When a run ends (`Store.finish_run`) its
report is computed from the store's aggregates and kept under that version; labels keep it
up to date (`Store.save_labels`). A report asked for whose kept version is not the run's
current one is computed again, never served stale.

What is kept is the report without the trials it lists per task (`max_results=0`): the
figures. Those listed trials are read for the tasks a page shows (`trial_pages.listed_trials`).
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, delete, func, insert, select

from trialkit._version import __version__
from trialkit.report import REPORT_SCHEMA_VERSION, Report
from trialkit.store import rows
from trialkit.store.encoding import pack_json, unpack_json
from trialkit.store.errors import StoreError
from trialkit.store.schema import labels, run_reports, runs, trials

_UNREADABLE: tuple[type[Exception], ...] = (StoreError, *rows.CORRUPTION_ERRORS)

KEPT_FORMAT = 1
"""Bumped when what is kept changes meaning: every kept report is then computed again."""


def run_version(conn: Connection, run_id: str) -> str | None:
    """What changes when the report of `run_id` would, as text; `None` for no such run."""
    run = conn.execute(
        select(runs.c.status, runs.c.finished_at).where(runs.c.id == run_id)
    ).one_or_none()
    if run is None:
        return None
    count = conn.scalar(select(func.count()).where(trials.c.run_id == run_id))
    labelled = conn.execute(
        select(func.count(), func.max(labels.c.labeled_at)).where(labels.c.run_id == run_id)
    ).one()
    code = [__version__, REPORT_SCHEMA_VERSION, KEPT_FORMAT]
    return json.dumps([*run, count, *labelled, *code])


def read_kept(conn: Connection, run_id: str, version: str) -> Report | None:
    """The report kept for `run_id` if it was made from the run as it is (`version`). One that
    cannot be read is not there: the report is computed again from the trials, which it only
    sums up."""
    row = conn.execute(select(run_reports).where(run_reports.c.run_id == run_id)).one_or_none()
    if row is None or row.version != version:
        return None
    try:
        return Report.model_validate_json(unpack_json(row.report, row.report_packed))
    except _UNREADABLE:
        return None


def keep(conn: Connection, run_id: str, version: str, report: Report) -> None:
    """Keep `report` (made with `max_results=0`) as the report of `run_id` at `version`."""
    text, packed = pack_json(report.model_dump_json())
    conn.execute(delete(run_reports).where(run_reports.c.run_id == run_id))
    conn.execute(
        insert(run_reports).values(
            run_id=run_id, version=version, report=text, report_packed=packed
        )
    )


def is_kept(conn: Connection, run_id: str) -> bool:
    """Whether `run_id` has a kept report (of any version)."""
    found = select(run_reports.c.run_id).where(run_reports.c.run_id == run_id)
    return conn.execute(found).first() is not None
