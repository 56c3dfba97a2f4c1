"""The list of runs (`/`) and one run (`/runs/RUN`): its summary and its tasks."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.report import Report
from trialkit.reports import _format as f
from trialkit.store import Store
from trialkit.store.store import RunSummary
from trialkit.view import pages

RUNS_PER_PAGE = 50
STATUSES = ("running", "completed", "interrupted", "stopped")


def runs_page(request: Request) -> Response:
    """The runs, newest first, filtered by `?q=` (in id, name or suite) and `?status=`."""
    q = (request.query_params.get("q") or "").strip()
    status = request.query_params.get("status") or ""
    if status and status not in STATUSES:
        raise pages.BadRequest(f"status {status!r}: use {', '.join(STATUSES)}")
    number = pages.page_number(request)
    every = pages.read(request, lambda store: store.list_runs(limit=None))
    chosen = [run for run in every if _matches(run, q, status)]
    start = (number - 1) * RUNS_PER_PAGE
    shown = chosen[start : start + RUNS_PER_PAGE]
    going = any(run.status == "running" for run in shown)
    return pages.render(
        request,
        "runs.html",
        nav_current="runs",
        runs=shown,
        stored=len(every),
        q=q,
        status=status,
        statuses=STATUSES,
        paging=pages.Paging(number, RUNS_PER_PAGE, len(chosen), len(shown)),
        filters={"q": q, "status": status},
        refresh=pages.REFRESH_S if going else None,
    )


def _matches(run: RunSummary, q: str, status: str) -> bool:
    if status and run.status != status:
        return False
    if not q:
        return True
    needle = q.lower()
    return any(needle in (text or "").lower() for text in (run.id, run.name, run.suite_id))


def run_page(request: Request) -> Response:
    ref = request.path_params["ref"]

    def load(store: Store) -> tuple[str, Report]:
        run_id = store.resolve_run(ref)
        return run_id, store.load_report(run_id)

    run_id, report = pages.read(request, load)
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
        refresh=pages.REFRESH_S if report.run.status == "running" else None,
    )


routes: list[BaseRoute] = [
    Route("/", runs_page, methods=["GET"], name="runs"),
    Route("/runs/{ref}", run_page, methods=["GET"], name="run"),
]
