"""The list of runs (`/`: filtered, sorted, paged) and one run (`/runs/RUN`): its summary and
its tasks."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.report import Report
from trialkit.reports import _format as f
from trialkit.store import Store, browse, trial_pages
from trialkit.store.browse import RunSort
from trialkit.view import pages
from trialkit.view.report_cache import ReportCache

RUNS_PER_PAGE = 50
TASKS_PER_PAGE = 200
"""Tasks in one page of a run's table (the summary is always the whole run's)."""
STATUSES = ("running", "completed", "interrupted", "stopped")
SORTS: dict[str, RunSort] = {
    "run": "id",
    "name": "name",
    "suite": "suite",
    "model": "model",
    "status": "status",
    "started": "started_at",
    "duration": "duration",
    "pass_rate": "pass_rate",
    "errors": "errors",
    "cost": "cost",
}
"""The `?sort=` values: a column of the list, and what `browse.list_runs` sorts it by."""
ASCENDING_FIRST = frozenset({"run", "name", "suite", "model", "status"})
"""Columns whose first click sorts A to Z; the others (times and figures) start high."""
COLUMNS = [
    ("run", "Run", ""),
    ("name", "Name", ""),
    ("suite", "Suite", ""),
    ("model", "Model", ""),
    ("status", "Status", ""),
    ("started", "Started", ""),
    ("duration", "Duration", "num"),
    ("pass_rate", "Pass rate", "num"),
    (None, "pass^k", "num"),
    ("errors", "Errors", "num"),
    ("cost", "Cost", "num"),
]
"""The list's columns: (the `?sort=` that sorts by it, or None, its heading, its class)."""


def day_or_time(request: Request, name: str, *, end_of_day: bool) -> datetime | None:
    """`?name=` as `YYYY-MM-DD` or an ISO date and time (UTC unless it says); a day alone
    means its start, or with `end_of_day` its last moment."""
    value = (request.query_params.get(name) or "").strip()
    if not value:
        return None
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = datetime.combine(day, time.max if end_of_day else time.min)
        else:
            moment = datetime.fromisoformat(value)
    except ValueError:
        raise pages.BadRequest(
            f"{name} {value[:30]!r}: expected a date (2026-12-01) or a date and time "
            "(2026-12-01T09:30)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def runs_page(request: Request) -> Response:
    """The runs, filtered by `?suite=`, `?model=`, `?name=` (part of it, any case),
    `?since=`, `?until=` and `?status=`, sorted by `?sort=COLUMN&order=asc|desc`, paged."""
    query = request.query_params
    suite = query.get("suite") or ""
    model = query.get("model") or ""
    name = (query.get("name") or "").strip()
    status = pages.choice(request, "status", STATUSES)
    since = day_or_time(request, "since", end_of_day=False)
    until = day_or_time(request, "until", end_of_day=True)
    sort = pages.choice(request, "sort", list(SORTS), "started")
    order = pages.choice(request, "order", ["asc", "desc"])
    order = order or ("asc" if sort in ASCENDING_FIRST else "desc")
    number = pages.page_number(request)

    def load(store: Store) -> tuple[browse.Facets, browse.RunPage]:
        listed = browse.list_runs(
            store,
            suite=suite or None,
            model=model or None,
            name=name or None,
            since=since,
            until=until,
            status=status or None,
            sort=SORTS[sort],
            descending=order == "desc",
            offset=(number - 1) * RUNS_PER_PAGE,
            limit=RUNS_PER_PAGE,
        )
        return browse.facets(store), listed

    facets, listed = pages.read(request, load)
    filters = {
        "suite": suite,
        "model": model,
        "name": name,
        "since": query.get("since") or "",
        "until": query.get("until") or "",
        "status": status,
    }
    going = any(run.status == "running" for run in listed.rows)
    return pages.render(
        request,
        "runs.html",
        nav_current="runs",
        runs=listed.rows,
        stored=bool(facets.suites),
        facets=facets,
        filters=filters,
        sort=sort,
        order=order,
        columns=COLUMNS,
        sort_links={key: _sort_link(filters, key, sort, order) for key in SORTS},
        statuses=STATUSES,
        paging=pages.Paging(number, RUNS_PER_PAGE, listed.total, len(listed.rows)),
        paging_query={**filters, "sort": sort, "order": order},
        refresh=pages.REFRESH_S if going else None,
    )


def _sort_link(filters: dict[str, str], key: str, sort: str, order: str) -> str:
    """The list sorted by `key`: the other way round when it is sorted by it already."""
    if key == sort:
        turned = "asc" if order == "desc" else "desc"
    else:
        turned = "asc" if key in ASCENDING_FIRST else "desc"
    return "/" + pages.query_string(**filters, sort=key, order=turned)


def run_page(request: Request) -> Response:
    ref = request.path_params["ref"]
    number = pages.page_number(request)
    cache: ReportCache = request.app.state.reports

    first = (number - 1) * TASKS_PER_PAGE

    def load(store: Store) -> tuple[str, Report, dict[str, list[trial_pages.ListedTrial]]]:
        run_id = store.resolve_run(ref)
        report = cache.report(store, run_id)
        shown = {t.id: t.trials for t in report.tasks[first : first + TASKS_PER_PAGE]}
        return run_id, report, trial_pages.listed_trials(store, run_id, shown)

    run_id, report, listed = pages.read(request, load)
    shown = report.tasks[first : first + TASKS_PER_PAGE]
    ks = sorted({k for task in report.tasks for k in task.pass_at_k}, key=int)
    return pages.render(
        request,
        "run.html",
        nav_current="runs",
        run_id=run_id,
        report=report,
        title=f.run_title(report),
        subtitle=f.run_subtitle(report),
        counts=[
            ("Tasks", report.summary.tasks, f.task_counts(report.summary)),
            ("Trials", report.summary.trials, f.trial_counts(report.summary)),
        ],
        figures=f.summary_rows(report),
        ks=[k for k in ks if k in set(f.shown_ks(dict.fromkeys(ks, 0.0)))],
        tasks=shown,
        listed=listed,
        paging=pages.Paging(number, TASKS_PER_PAGE, len(report.tasks), len(shown)),
        refresh=pages.REFRESH_S if report.run.status == "running" else None,
    )


routes: list[BaseRoute] = [
    Route("/", runs_page, methods=["GET"], name="runs"),
    Route("/runs/{ref}", run_page, methods=["GET"], name="run"),
]
