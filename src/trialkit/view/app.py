"""The viewer as an ASGI application: `create_app(store, allowed_hosts=…)`.

Pages live in route modules under `trialkit/view/routes/`, one per part of the viewer
(`runs`, `trials`, `compare`, `matrix`, `trends`, `search`, `review`, `api`). Each exports
`routes: list[BaseRoute]`; `ROUTE_MODULES` below lists them in the order they are matched.

To add a page:

1. write its endpoint in a route module (a new one for a new part, listed in
   `ROUTE_MODULES`): a plain `def name(request) -> Response` runs in a worker thread, so it may
   read the store, through `pages.read(request, lambda store: …)`, which holds the store lock;
2. answer with `pages.render(request, "name.html", **context)`, the template extending
   `base.html` (blocks: `title`, `heading`, `subtitle`, `content`; `nav_current` names the
   header link to mark);
3. raise `pages.NotFound` or `pages.BadRequest` for a 404 or a 400 (the store's `RunNotFound`,
   `TrialNotFound` and `AmbiguousRun` are mapped too): the page says why, or `{"error",
   "status"}` under `/api/`;
4. put CSS in `static/view.css` and scripts in `static/*.js`: the Content-Security-Policy
   refuses inline styles and scripts, and pages must read fine without JavaScript.

A route that changes something (POST) wraps its async endpoint in
`security.csrf_protected`, and its form carries `csrf_token()` as the `csrf_token` field.
The review routes (`routes/review.py`) are the only ones that write, and only while
`app.state.read_only` is `None`.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterable
from types import ModuleType

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from trialkit.store import AmbiguousRun, RunNotFound, Store, TrialNotFound
from trialkit.view import pages
from trialkit.view.report_cache import ReportCache, SuiteCache
from trialkit.view.routes import api, compare, matrix, review, runs, search, trends, trials
from trialkit.view.security import SecurityMiddleware

ROUTE_MODULES: list[ModuleType] = [runs, trials, compare, matrix, trends, search, review, api]
NOT_FOUND = (pages.NotFound, RunNotFound, TrialNotFound)
BAD_REQUEST = (pages.BadRequest, AmbiguousRun)
METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def create_app(
    store: Store, *, allowed_hosts: Iterable[str] | None, read_only: bool = False
) -> Starlette:
    """The viewer of `store`, answering only requests whose `Host` is in `allowed_hosts`
    (`None`: any host, for a viewer listening beyond loopback).

    It takes labels from its review forms unless `read_only`, or unless it answers any host:
    labels are written only through a viewer on loopback."""
    routes: list[BaseRoute] = [r for module in ROUTE_MODULES for r in module.routes]
    routes.append(Mount("/static", app=StaticFiles(directory=pages.STATIC), name="static"))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityMiddleware, allowed_hosts=allowed_hosts, error_page=error_page)
        ],
        exception_handlers={
            HTTPException: _http_error,
            **dict.fromkeys(NOT_FOUND, _not_found),
            **dict.fromkeys(BAD_REQUEST, _bad_request),
        },
    )
    app.state.store = store
    app.state.lock = threading.Lock()
    app.state.reports = ReportCache()
    app.state.suites = SuiteCache()
    app.state.csrf_secret = secrets.token_bytes(32)
    app.state.read_only = (
        "it was started read-only (--read-only)"
        if read_only
        else "it listens beyond loopback"
        if allowed_hosts is None
        else None
    )
    return app


def error_page(scope: Scope, status: int, message: str) -> Response:
    """The answer to an error: a page, or `{"error", "status"}` JSON under `/api/`."""
    path: str = scope.get("path", "")
    if path == "/api" or path.startswith("/api/"):
        body = json.dumps({"error": message, "status": status}) + "\n"
        return Response(body, status_code=status, media_type="application/json")
    return pages.message_page(Request(scope), status, message)


def _message(exc: BaseException) -> str:
    return str(exc).strip("'\"")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {
        404: f"no page at {request.url.path}",
        405: "the viewer only reads: GET and HEAD",
    }
    message = exc.detail if exc.detail and exc.detail != _phrase(exc.status_code) else ""
    response = error_page(
        request.scope, exc.status_code, message or messages.get(exc.status_code, "")
    )
    if exc.headers:
        response.headers.update(exc.headers)
    if "allow" in response.headers:
        allowed = {m.strip() for m in response.headers["allow"].split(",")}
        response.headers["allow"] = ", ".join(m for m in METHOD_ORDER if m in allowed)
    return response


def _phrase(status: int) -> str:
    from http import HTTPStatus

    return HTTPStatus(status).phrase


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_page(request.scope, 404, _message(exc))


async def _bad_request(request: Request, exc: Exception) -> Response:
    return error_page(request.scope, 400, _message(exc))
