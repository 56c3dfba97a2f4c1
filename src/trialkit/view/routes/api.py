"""The JSON API: `/api/runs`, `/api/runs/RUN` (its report), a run's progress (what the live
pages poll) and one whole trial."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.store import Store
from trialkit.view import pages

RUNS_LISTED = 200


def _json(value: Any) -> Response:
    return Response(json.dumps(value, indent=2) + "\n", media_type="application/json")


def runs(request: Request) -> Response:
    listed = pages.read(request, lambda store: store.list_runs(limit=RUNS_LISTED))
    return _json([run.model_dump(mode="json") for run in listed])


def run(request: Request) -> Response:
    ref = request.path_params["ref"]

    def load(store: Store) -> str:
        return store.load_report(store.resolve_run(ref)).to_json()

    return _json(json.loads(pages.read(request, load)))


def progress(request: Request) -> Response:
    """`/api/runs/RUN/progress?after=N`: the run's status and counts so far, and the trials
    that finished after the first N (in the order they finished, a page at a time)."""
    from trialkit.store.progress import run_progress

    ref = request.path_params["ref"]
    after = _count(request.query_params.get("after") or "0", "after")

    def load(store: Store) -> dict[str, Any]:
        found = run_progress(store, store.resolve_run(ref), after=after)
        data = found.model_dump(mode="json", exclude={"trials", "run_id"})
        data["run"] = found.run_id
        data["next"] = after + len(found.trials)
        data["trials"] = [
            {
                "task": t.task_id,
                "index": t.index,
                "verdict": t.verdict.value,
                "status": t.status.value,
                "duration_s": t.duration_s,
                "url": pages.trial_url(found.run_id, t.task_id, t.index),
            }
            for t in found.trials
        ]
        return data

    return _json(pages.read(request, load))


def _count(value: str, name: str) -> int:
    if not value.isascii() or not value.isdigit() or len(value) > 12:
        raise pages.BadRequest(f"{name} {value[:20]!r}: expected 0, 1, 2…")
    return int(value)


def trial(request: Request) -> Response:
    ref, task_id = request.path_params["ref"], request.path_params["task"]
    index = pages.trial_index(request.path_params["index"])

    def load(store: Store) -> dict[str, Any]:
        found = store.load_trial(store.resolve_run(ref), task_id, index)
        return found.model_dump(mode="json")

    return _json(pages.read(request, load))


def nothing(request: Request) -> Response:
    raise pages.NotFound(f"no API at {request.url.path}")


routes: list[BaseRoute] = [
    Route("/api/runs", runs, methods=["GET"]),
    Route("/api/runs/{ref}", run, methods=["GET"]),
    Route("/api/runs/{ref}/progress", progress, methods=["GET"]),
    Route("/api/runs/{ref}/trials/{task:path}/{index}", trial, methods=["GET"]),
    Route("/api/{rest:path}", nothing, methods=["GET"]),
]
