"""Human review in the browser: a run's review queue (`/runs/RUN/review`), the label form of a
trial's page, and the one route that writes, `POST /runs/RUN/review`.

A label given here is saved by `Store.save_label`, as `trialkit review` saves it, so reports,
`trialkit labels export` and `trialkit calibrate` see it at once. Writing needs the session's
CSRF token and a viewer that takes labels (`app.state.read_only` is `None`): one started
with `--read-only`, or listening beyond loopback, shows labels but takes none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote, unquote

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from trialkit.labels import HUMAN, Label
from trialkit.store import GraderNotFound, PendingReview, Store, StoreError, TrialNotFound
from trialkit.store.queries import task_ids
from trialkit.trial import Trial
from trialkit.view import pages
from trialkit.view.security import csrf_protected

REVIEWER_COOKIE = "trialkit_reviewer"
REVIEWER_COOKIE_S = 365 * 24 * 3600
QUEUE_SHOWN = 500
"""Pending reviews the queue page lists (it counts them all)."""
VERDICTS = ("pass", "fail", "unknown")
MAX_NAME = 200
MAX_COMMENT = 20_000
DONE_KEYS = ("labelled_task", "labelled_trial", "labelled_grader")
"""Query keys of the label just saved, which the next page confirms."""


def review_url(run_id: str, **query: str | int | None) -> str:
    return f"{pages.run_url(run_id)}/review" + pages.query_string(**query)


def read_only_reason(request: Request) -> str | None:
    """Why this viewer takes no labels, or `None` when it does."""
    reason: str | None = request.app.state.read_only
    return reason


def reviewer_of(request: Request) -> str:
    """The reviewer the form proposes: the one this browser named last, else the CLI's
    default (`$TRIALKIT_REVIEWER`, else the user name)."""
    from trialkit.cli.review import default_reviewer

    remembered = unquote(request.cookies.get(REVIEWER_COOKIE, "")).strip()
    return remembered[:MAX_NAME] or default_reviewer() or ""


@dataclass
class ReviewForm:
    """What a trial's page shows of its review: its labels, and the form when labels are
    taken."""

    run_id: str
    task_id: str
    index: int
    read_only: str | None
    """Why no form is shown; `None` when it is."""
    reviewer: str
    graders: list[str]
    """The graders a label may be for: the trial's, pending ones first."""
    pending: list[str]
    labels: list[Label]
    left: int
    """Reviews still pending in the run."""
    skip_url: str | None
    """The next trial waiting for a reviewer, to go to without labelling this one."""
    saved: Label | None = None
    """The label just saved (on the page the form sent the reviewer to)."""
    action: str = field(init=False)
    """Where the form is sent (and the queue page)."""

    def __post_init__(self) -> None:
        self.action = review_url(self.run_id)

    @property
    def queue_url(self) -> str:
        return self.action


def trial_review(request: Request, store: Store, trial: Trial) -> ReviewForm:
    """The review part of `trial`'s page (read under the store lock)."""
    run_id = trial.run_id
    stored = store.labels(run_id)
    waiting = store.pending_reviews(run_id)
    pending = [s.name for s in trial.scores if s.pending]
    names = list(dict.fromkeys([*pending, *(s.name for s in trial.scores)])) or [HUMAN]
    return ReviewForm(
        run_id=run_id,
        task_id=trial.task_id,
        index=trial.index,
        read_only=read_only_reason(request),
        reviewer=reviewer_of(request),
        graders=names,
        pending=pending,
        labels=[x for x in stored if (x.task_id, x.trial) == (trial.task_id, trial.index)],
        left=len(waiting),
        skip_url=_skip_url(run_id, (trial.task_id, trial.index), waiting),
        saved=just_saved(request, stored),
    )


def _skip_url(run_id: str, here: tuple[str, int], waiting: list[PendingReview]) -> str | None:
    keys = list(dict.fromkeys((p.task_id, p.trial) for p in waiting))
    if here in keys:
        keys = keys[keys.index(here) + 1 :] + keys[: keys.index(here)]
    if not keys:
        return None
    return pages.trial_url(run_id, *keys[0]) + "#review"


def just_saved(request: Request, stored: list[Label]) -> Label | None:
    """The stored label the address names as just saved (never text from the address)."""
    task, index, grader = (request.query_params.get(k) for k in DONE_KEYS)
    if not (task and index and grader):
        return None
    wanted = (task, index, grader)
    return next((x for x in stored if (x.task_id, str(x.trial), x.grader) == wanted), None)


def queue_page(request: Request) -> Response:
    ref = request.path_params["ref"]

    def load(store: Store) -> tuple[str, list[PendingReview], list[Label]]:
        run_id = store.resolve_run(ref)
        return run_id, store.pending_reviews(run_id), store.labels(run_id)

    run_id, pending, stored = pages.read(request, load)
    return pages.render(
        request,
        "review.html",
        nav_current="runs",
        run_id=run_id,
        pending=pending[:QUEUE_SHOWN],
        pending_total=len(pending),
        labels=stored,
        saved=just_saved(request, stored),
        read_only=read_only_reason(request),
    )


async def save_label(request: Request) -> Response:
    """Save the label a review form sent: refused (403) by a viewer that takes no labels before
    anything of the request is read, then (403) without the session's CSRF token."""
    reason = read_only_reason(request)
    if reason is not None:
        raise HTTPException(403, f"this viewer takes no labels: {reason}")
    return await _save_checked_label(request)


@csrf_protected
async def _save_checked_label(request: Request) -> Response:
    ref = request.path_params["ref"]
    label = parse_label(await request.form())

    def save(store: Store) -> str:
        run_id = store.resolve_run(ref)
        before = store.pending_reviews(run_id)
        chosen = label.model_copy(update={"run_id": run_id})
        try:
            store.save_label(chosen)
        except GraderNotFound as exc:
            raise pages.BadRequest(f"grader: {exc}") from None
        except TrialNotFound as exc:
            raise pages.BadRequest(f"{missing_field(store, run_id, label)}: {exc}") from None
        except StoreError as exc:  # a store that takes no writes (a read-only file, a replica)
            raise HTTPException(503, f"the label was not saved: {exc}") from None
        return next_address(run_id, label, before, store.pending_reviews(run_id))

    where = await run_in_threadpool(pages.read, request, save)
    response = RedirectResponse(where, status_code=303)
    response.set_cookie(
        REVIEWER_COOKIE,
        quote(label.reviewer or "", safe=""),
        max_age=REVIEWER_COOKIE_S,
        path="/",
        httponly=True,
        samesite="strict",
    )
    return response


def missing_field(store: Store, run_id: str, label: Label) -> str:
    """The field of a review form that names no trial of the run: `task` when the run has no
    such task, else `trial`."""
    return "task" if label.task_id not in task_ids(store, run_id) else "trial"


def next_address(
    run_id: str, label: Label, before: list[PendingReview], after: list[PendingReview]
) -> str:
    """Where the reviewer goes after `label`: the next trial still pending after this one in
    the queue's order (from the start when none is), else the queue, which says it is done."""
    done: dict[str, str | int | None] = {
        "labelled_task": label.task_id,
        "labelled_trial": label.trial,
        "labelled_grader": label.grader,
    }
    order = {(p.task_id, p.trial): n for n, p in enumerate(before)}
    here = order.get((label.task_id, label.trial), -1)
    later = [p for p in after if order.get((p.task_id, p.trial), len(order)) > here]
    if not (later or after):
        return review_url(run_id, **done)
    chosen = (later or after)[0]
    return pages.trial_url(run_id, chosen.task_id, chosen.trial) + pages.query_string(**done)


def parse_label(form: FormData) -> Label:
    """The label a review form sent; `pages.BadRequest` naming the first field that is wrong."""
    from trialkit.cli.review import default_reviewer

    task = _text(form, "task", required=True, most=10_000)
    index_text = _text(form, "trial", required=True, most=20)
    try:
        index = pages.trial_index(index_text)
    except pages.BadRequest as exc:
        raise pages.BadRequest(f"trial: {exc}") from None
    grader = _text(form, "grader", required=True, most=MAX_NAME)
    verdict = _text(form, "verdict", required=True, most=20)
    if verdict not in VERDICTS:
        raise pages.BadRequest("verdict: choose pass, fail or unknown")
    score = _score(_text(form, "score", most=50))
    comment = _text(form, "comment", most=MAX_COMMENT)
    reviewer = _text(form, "reviewer", most=MAX_NAME) or default_reviewer()
    try:
        return Label(
            task_id=task,
            trial=index,
            grader=grader,
            verdict=verdict,  # checked against VERDICTS above
            score=score,
            reviewer=reviewer or None,
            labeled_at=datetime.now(UTC),
            comment=comment or None,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(part) for part in first["loc"]) or "label"
        raise pages.BadRequest(f"{name}: {first['msg']}") from None


def _text(form: FormData, name: str, *, required: bool = False, most: int) -> str:
    value = form.get(name)
    if value is not None and not isinstance(value, str):
        raise pages.BadRequest(f"{name}: expected text, not a file")
    text = (value or "").strip()
    if required and not text:
        raise pages.BadRequest(f"{name}: missing")
    if len(text) > most:
        raise pages.BadRequest(f"{name}: longer than {most:,} characters")
    return text


def _score(text: str) -> float | None:
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not 0.0 <= number <= 1.0:  # also refuses nan
        raise pages.BadRequest("score: give a number from 0 to 1, or leave it empty")
    return number


routes: list[BaseRoute] = [
    Route("/runs/{ref}/review", queue_page, methods=["GET"], name="review"),
    Route("/runs/{ref}/review", save_label, methods=["POST"], name="save_label"),
]
