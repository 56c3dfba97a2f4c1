"""Tasks × runs side by side (`/matrix?run=A&run=B…` or `?suite=SUITE&last=N`): each cell a
task's passed trials, its verdict and the start of its first trial's output."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.store import Store, browse, queries
from trialkit.view import pages
from trialkit.view.routes.compare import chosen_runs, resolve_chosen

TASKS_PER_PAGE = 50
MAX_RUNS = 20
"""Columns a matrix may have."""
DEFAULT_LAST = 5


@dataclass
class MatrixColumn:
    run_id: str
    name: str | None


def matrix_page(request: Request) -> Response:
    refs = chosen_runs(request)
    suite = request.query_params.get("suite") or ""
    if refs and suite:
        raise pages.BadRequest("a matrix takes runs (?run=) or a suite (?suite=), not both")
    if not refs and not suite:
        raise pages.BadRequest(
            "a matrix needs runs: /matrix?run=RUN&run=RUN, or /matrix?suite=SUITE&last=N"
        )
    if len(refs) > MAX_RUNS:
        raise pages.BadRequest(f"{len(refs)} runs: a matrix shows at most {MAX_RUNS}")
    last = pages.whole_number(request, "last", DEFAULT_LAST, most=MAX_RUNS)
    task = (request.query_params.get("task") or "").strip()
    number = pages.page_number(request)

    def load(store: Store) -> tuple[list[MatrixColumn], browse.Matrix]:
        if suite:
            trend = browse.suite_trend(store, suite, limit=last)
            if not trend:
                raise pages.NotFound(f"no run of suite {suite!r} in the store")
            columns = [MatrixColumn(p.run_id, p.name) for p in trend]
        else:
            ids = resolve_chosen(store, request)
            columns = [MatrixColumn(i, queries.run_name(store, i)) for i in ids]
        found = browse.matrix(
            store,
            [c.run_id for c in columns],
            task=task or None,
            offset=(number - 1) * TASKS_PER_PAGE,
            limit=TASKS_PER_PAGE,
        )
        return columns, found

    columns, found = pages.read(request, load)
    filters: dict[str, pages.QueryValue] = (
        {"suite": suite, "last": last, "task": task}
        if suite
        else {"run": [c.run_id for c in columns], "task": task}
    )
    return pages.render(
        request,
        "matrix.html",
        nav_current="compare",
        columns=columns,
        matrix=found,
        suite=suite,
        last=last,
        task=task,
        run_ids=[c.run_id for c in columns],
        paging=pages.Paging(number, TASKS_PER_PAGE, found.total, len(found.rows)),
        filters=filters,
    )


routes: list[BaseRoute] = [Route("/matrix", matrix_page, methods=["GET"], name="matrix")]
