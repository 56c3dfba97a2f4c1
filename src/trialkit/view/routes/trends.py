"""Suites over time: `/trends` (each suite with its last run's figures) and `/trends/SUITE`
(charts over its runs, each task's history strip and the suite's health findings)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.analysis.health import HealthError, SuiteHealth, TaskHealth, suite_health
from trialkit.reports import health as health_words
from trialkit.score import Verdict
from trialkit.store import Store, browse
from trialkit.view import charts, pages
from trialkit.view.report_cache import SuiteCache

DEFAULT_LAST = 30
MAX_LAST = 200
STRIPS_PER_PAGE = 100


@dataclass
class SuiteLine:
    suite_id: str
    runs: int
    last: browse.RunRow


@dataclass
class Strip:
    """One task's row of the history: its verdict per run, and its health."""

    task_id: str
    cells: list[tuple[str, Verdict | None]]
    """(run id, verdict) per run of the window, oldest first."""
    health: TaskHealth | None


def trends_index(request: Request) -> Response:
    def load(store: Store) -> list[SuiteLine]:
        lines = []
        for suite_id in browse.facets(store).suites:
            page = browse.list_runs(store, suite=suite_id, limit=1)
            if page.rows:
                lines.append(SuiteLine(suite_id, page.total, page.rows[0]))
        return sorted(lines, key=lambda line: line.last.started_at, reverse=True)

    lines = pages.read(request, load)
    return pages.render(request, "trends.html", nav_current="trends", suites=lines)


def suite_page(request: Request) -> Response:
    suite_id = request.path_params["suite"]
    last = pages.whole_number(request, "last", DEFAULT_LAST, most=MAX_LAST)
    number = pages.page_number(request)

    def load(
        store: Store,
    ) -> tuple[list[browse.TrendPoint], browse.TaskHistory, SuiteHealth | None]:
        points = browse.suite_trend(store, suite_id, limit=last)
        history, counts = browse.task_history_and_counts(store, suite_id, runs=last)
        try:
            health = suite_health(store, suite_id, last=last, counts=counts)
        except HealthError:
            health = None
        return points, history, health

    kept: SuiteCache = request.app.state.suites
    points, history, health = pages.read(
        request, lambda store: kept.get(store, suite_id, f"trend:{last}", load)
    )
    by_task = {t.id: t for t in health.tasks} if health else {}
    start = (number - 1) * STRIPS_PER_PAGE
    shown = history.tasks[start : start + STRIPS_PER_PAGE]
    strips = [
        Strip(
            task_id=strip.task_id,
            cells=list(zip(history.runs, strip.verdicts, strict=True)),
            health=by_task.get(strip.task_id),
        )
        for strip in shown
    ]
    return pages.render(
        request,
        "trend.html",
        status_code=200 if points else 404,
        nav_current="trends",
        suite_id=suite_id,
        points=points,
        last=last,
        charts=charts.trend_charts(points) if points else [],
        strips=strips,
        health=health,
        health_rows=health_words.summary_rows(health) if health else [],
        flag_words=health_words.flag_words,
        trend_text=health_words.trend_text,
        paging=pages.Paging(number, STRIPS_PER_PAGE, len(history.tasks), len(strips)),
        filters={"last": last if last != DEFAULT_LAST else None},
    )


routes: list[BaseRoute] = [
    Route("/trends", trends_index, methods=["GET"], name="trends"),
    Route("/trends/{suite:path}", suite_page, methods=["GET"], name="trend"),
]
