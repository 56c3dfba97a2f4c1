"""A run's trials (`/runs/RUN/trials`, filtered and paged) and one trial, whole."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.report import TaskPlan
from trialkit.reports.transcript import TurnView, turns_of, why_not_passed
from trialkit.score import Verdict
from trialkit.store import Store, queries, trial_pages
from trialkit.store.progress import RunProgress, run_progress
from trialkit.transcript import Message, ModelCall
from trialkit.trial import Trial
from trialkit.view import pages

TRIALS_PER_PAGE = 100
GLOB_CHARACTERS = frozenset("*?[")


def matching_tasks(task_ids: list[str], pattern: str) -> list[str]:
    """The task ids `pattern` chooses: the one it names exactly, else those it matches as a
    glob (when it has `*`, `?` or `[`), else those that contain it (ignoring case)."""
    if pattern in task_ids:
        return [pattern]
    if GLOB_CHARACTERS & set(pattern):
        return [t for t in task_ids if fnmatchcase(t, pattern)]
    needle = pattern.lower()
    return [t for t in task_ids if needle in t.lower()]


def trials_page(request: Request) -> Response:
    ref = request.path_params["ref"]
    verdict = request.query_params.get("verdict") or ""
    if verdict and verdict not in {v.value for v in Verdict}:
        raise pages.BadRequest(f"verdict {verdict!r}: use pass, fail, error or unknown")
    task = request.query_params.get("task") or ""
    number = pages.page_number(request)

    def load(store: Store) -> tuple[str, queries.TrialListing, list[str] | None, RunProgress]:
        run_id = store.resolve_run(ref)
        tasks = matching_tasks(_task_ids(store, run_id), task) if task else None
        listing = _listing(store, run_id, tasks, verdict, number)
        return run_id, listing, tasks, run_progress(store, run_id, limit=0)

    run_id, listing, tasks, progress = pages.read(request, load)
    lines = [(line, why_not_passed(line)) for line in listing.lines]
    return pages.render(
        request,
        "trials.html",
        nav_current="runs",
        run_id=run_id,
        lines=lines,
        verdict=verdict,
        task=task,
        matched_tasks=None if tasks is None else len(tasks),
        verdicts=[v.value for v in Verdict],
        paging=pages.Paging(number, TRIALS_PER_PAGE, listing.total, len(listing.lines)),
        filters={"verdict": verdict, "task": task},
        progress=progress,
        refresh=pages.REFRESH_S if progress.status == "running" else None,
    )


def _task_ids(store: Store, run_id: str) -> list[str]:
    planned = queries.task_ids(store, run_id)
    return planned or sorted({line.task_id for line in queries.list_trials(store, run_id).lines})


def _listing(
    store: Store, run_id: str, tasks: list[str] | None, verdict: str, number: int
) -> queries.TrialListing:
    if tasks == []:
        return queries.TrialListing(lines=[], total=0)
    chosen = Verdict(verdict) if verdict else None
    offset = (number - 1) * TRIALS_PER_PAGE
    return trial_pages.trials_page(
        store, run_id, tasks=tasks, verdict=chosen, offset=offset, limit=TRIALS_PER_PAGE
    )


@dataclass
class TrialPage:
    """One trial, in the parts its page shows."""

    trial: Trial
    run_id: str
    run_name: str | None
    system: list[str]
    """The system prompts the agent was given."""
    task_input: str | list[Message] | None
    turns: list[TurnView]
    grader_calls: list[ModelCall]
    siblings: list[int]
    plan: TaskPlan | None = None
    """The task as the run planned it: its reference and criteria, when it has them."""

    def judge_metadata(self) -> list[tuple[str, dict[str, Any]]]:
        return [(score.name, score.metadata) for score in self.trial.scores if score.metadata]


def load_trial_page(store: Store, ref: str, task_id: str, index: int) -> TrialPage:
    run_id = store.resolve_run(ref)
    trial = store.load_trial(run_id, task_id, index)
    transcript = trial.transcript
    first = transcript.turns[0].input if transcript.turns else None
    if first is None:
        users = [m for m in transcript.messages if m.role == "user"]
        first = users[0].content if users else None
    return TrialPage(
        trial=trial,
        run_id=run_id,
        run_name=queries.run_name(store, run_id),
        system=_system_prompts(trial),
        task_input=first,
        turns=turns_of(transcript),
        grader_calls=[c for c in transcript.model_calls if c.role == "grader"],
        siblings=queries.trial_indices(store, run_id, task_id),
        plan=queries.task_plan(store, run_id, task_id),
    )


def _system_prompts(trial: Trial) -> list[str]:
    """The system messages of the transcript, else those the agent's first model call sent."""
    found = [m.content for m in trial.transcript.messages if m.role == "system"]
    calls = [c for c in trial.transcript.model_calls if c.role == "agent"]
    if found or not calls:
        return found
    sent = calls[0].request.get("messages")
    if not isinstance(sent, list):
        return []
    return [
        m["content"]
        for m in sent
        if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str)
    ]


def trial_page(request: Request) -> Response:
    ref, task_id = request.path_params["ref"], request.path_params["task"]
    index = pages.trial_index(request.path_params["index"])
    from trialkit.view.routes.review import ReviewForm, trial_review

    def load(store: Store) -> tuple[TrialPage, ReviewForm]:
        view = load_trial_page(store, ref, task_id, index)
        return view, trial_review(request, store, view.trial)

    view, review = pages.read(request, load)
    return pages.render(request, "trial.html", nav_current="runs", view=view, review=review)


routes: list[BaseRoute] = [
    Route("/runs/{ref}/trials", trials_page, methods=["GET"], name="trials"),
    Route("/runs/{ref}/trials/{task:path}/{index}", trial_page, methods=["GET"], name="trial"),
]
