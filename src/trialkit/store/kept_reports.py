"""A finished run's report, kept in the store beside the run (`run_reports`, m011_kept_reports).

A run's report changes only when the run does: trials stored (a resume, a retry), its end
recorded, labels given. Its version says all of that in one string, read from indexes in
a few milliseconds: the run's status and end, its trial count, its labels' count and latest
time, and the report code's own version (trialkit's, the report schema's), so an upgrade
never serves a report an older trialkit computed. When a run ends (`Store.finish_run`) its
report is computed from the store's aggregates and kept under that version; labels keep it
up to date (`Store.save_labels`). A report asked for whose kept version is not the run's
current one is computed again, never served stale.

What is kept is the report without the trials it lists per task (`max_results=0`), and the
run's headline figures (`run_figures.RunFigures`, for the runs list and trend pages). The
listed trials are read for the tasks a page shows (`trial_pages.listed_trials`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select

from trialkit._version import __version__
from trialkit.report import REPORT_SCHEMA_VERSION, Report, RunInfo, SuiteInfo
from trialkit.store import rows
from trialkit.store.encoding import pack_json_parts, unpack_json
from trialkit.store.errors import StoreError
from trialkit.store.schema import labels, run_reports, runs, trials

_UNREADABLE: tuple[type[Exception], ...] = (StoreError, *rows.CORRUPTION_ERRORS)

KEPT_FORMAT = 2
"""Bumped when what is kept changes meaning: every kept report is then computed again.
2: the suite's pass rate is the mean over tasks, its interval clustered by task."""


def run_version(conn: Connection, run_id: str) -> str | None:
    """What changes when the report of `run_id` would, as text; `None` for no such run."""
    return run_versions(conn, [run_id]).get(run_id)


def run_versions(conn: Connection, run_ids: Sequence[str]) -> dict[str, str]:
    """`run_version` of each of `run_ids` that exists, in three grouped queries per 200."""
    code = [__version__, REPORT_SCHEMA_VERSION, KEPT_FORMAT]
    found: dict[str, str] = {}
    for start in range(0, len(run_ids), _RUNS_PER_QUERY):
        chunk = list(run_ids[start : start + _RUNS_PER_QUERY])
        ended = conn.execute(
            select(runs.c.id, runs.c.status, runs.c.finished_at).where(runs.c.id.in_(chunk))
        ).all()
        counts: dict[str, int] = dict(
            conn.execute(
                select(trials.c.run_id, func.count())
                .where(trials.c.run_id.in_(chunk))
                .group_by(trials.c.run_id)
            ).all()
        )
        labelled = {
            run_id: (n, latest)
            for run_id, n, latest in conn.execute(
                select(labels.c.run_id, func.count(), func.max(labels.c.labeled_at))
                .where(labels.c.run_id.in_(chunk))
                .group_by(labels.c.run_id)
            )
        }
        for run_id, status, finished_at in ended:
            n, latest = labelled.get(run_id, (0, None))
            version = [status, finished_at, counts.get(run_id, 0), n, latest, *code]
            found[run_id] = json.dumps(version)
    return found


_RUNS_PER_QUERY = 200


def kept_figures(conn: Connection, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The headline figures kept for those of `run_ids` whose kept report is of the run as
    it is (see `run_figures`), as the JSON object they were kept as."""
    versions = run_versions(conn, run_ids)
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(run_ids), _RUNS_PER_QUERY):
        chunk = list(run_ids[start : start + _RUNS_PER_QUERY])
        kept = select(run_reports.c.run_id, run_reports.c.version, run_reports.c.figures)
        for run_id, version, figures in conn.execute(kept.where(run_reports.c.run_id.in_(chunk))):
            if figures is None or versions.get(run_id) != version:
                continue
            try:
                found[run_id] = json.loads(figures)
            except ValueError:  # unreadable: computed again
                continue
    return found


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


def keep(
    conn: Connection,
    run_id: str,
    version: str,
    report: Report,
    figures: dict[str, Any],
    *,
    run: RunInfo | None = None,
    suite: SuiteInfo | None = None,
) -> None:
    """Keep `report` and the run's headline `figures` (a JSON object, see `run_figures`) as
    those of `run_id` at `version`. What is kept lists no trials (as `max_results=0` makes
    it): the trials `report` lists are left out, and counted as omitted. `run` and `suite`,
    when given, are kept instead of the report's own."""
    text, packed = pack_json_parts(_kept_json(report, run, suite))
    conn.execute(delete(run_reports).where(run_reports.c.run_id == run_id))
    conn.execute(
        insert(run_reports).values(
            run_id=run_id,
            version=version,
            report=text,
            report_packed=packed,
            figures=json.dumps(figures),
        )
    )


def is_kept(conn: Connection, run_id: str) -> bool:
    """Whether `run_id` has a kept report (of any version)."""
    found = select(run_reports.c.run_id).where(run_reports.c.run_id == run_id)
    return conn.execute(found).first() is not None


def _kept_json(report: Report, run: RunInfo | None, suite: SuiteInfo | None) -> Iterator[str]:
    """The JSON of `report` as kept, in parts: task by task, so a report of many tasks is
    neither copied nor held as one string (10,000 task reports are 30 MB as objects)."""
    head = report.model_dump_json(exclude={"tasks", "run", "suite"})
    yield head[:-1]  # without its closing brace: the parts below follow inside it
    yield ',"run":' + (run or report.run).model_dump_json()
    yield ',"suite":' + (suite or report.suite).model_dump_json()
    yield ',"tasks":['
    for i, task in enumerate(report.tasks):
        body = task.model_dump_json(exclude={"results", "results_omitted"})
        yield f'{"," if i else ""}{body[:-1]},"results":[],"results_omitted":{task.trials}}}'
    yield "]}"
