"""Runs side by side (`/compare?a=RUN&b=RUN[&c=…]` or `?run=RUN&run=RUN…`) and two trials
side by side (`/diff`)."""

from __future__ import annotations

import string

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.store import Store, queries
from trialkit.view import pages
from trialkit.view.routes.trials import TrialPage, load_trial_page

RUN_KEYS = string.ascii_lowercase


def chosen_runs(request: Request) -> list[str]:
    """The runs named by `?a=`, `?b=`, … then each `?run=` (as the list of runs sends its
    ticked runs), in that order, each once."""
    query = request.query_params
    named = [query[k] for k in RUN_KEYS if query.get(k)]
    return list(dict.fromkeys(named + [r for r in query.getlist("run") if r]))


def resolve_chosen(store: Store, request: Request) -> list[str]:
    """The ids of `chosen_runs`: those named by letter in their order, then the `?run=` ones
    in the order they started, so the oldest ticked run is the baseline whatever order the
    list of runs was sorted in."""
    query = request.query_params
    named = [store.resolve_run(query[k]) for k in RUN_KEYS if query.get(k)]
    ticked = [store.resolve_run(r) for r in query.getlist("run") if r]
    return list(dict.fromkeys(named + queries.oldest_first(store, ticked)))


def compare_page(request: Request) -> Response:
    from trialkit.analysis.compare import CompareError, compare_runs
    from trialkit.reports import compare as words

    refs = chosen_runs(request)
    if len(refs) < 2:
        raise pages.BadRequest(
            "compare needs two runs: /compare?a=RUN&b=RUN, or runs ticked on the list of runs"
        )
    try:
        kept = request.app.state.reports
        comparison = pages.read(
            request,
            lambda store: compare_runs(
                store, resolve_chosen(store, request), report_of=kept.report
            ),
        )
    except CompareError as exc:
        raise pages.BadRequest(str(exc)) from exc
    return pages.render(
        request,
        "compare.html",
        nav_current="compare",
        comparison=comparison,
        words=words,
        refs=refs,
        title=words.compare_title(comparison),
        run_header=words.RUN_HEADER,
        change_words=words.CHANGE_WORDS,
    )


def diff_page(request: Request) -> Response:
    """One task's trials in two runs: `?trial=N` the same number in both (0 by default), or
    `?a_trial=N&b_trial=M`."""
    task_id = pages.required(request, "task")
    a, b = pages.required(request, "a"), pages.required(request, "b")
    query = request.query_params
    both = query.get("trial") or "0"
    indices = (
        pages.trial_index(query.get("a_trial") or both),
        pages.trial_index(query.get("b_trial") or both),
    )

    def load(store: Store) -> tuple[TrialPage, TrialPage]:
        return (
            load_trial_page(store, a, task_id, indices[0]),
            load_trial_page(store, b, task_id, indices[1]),
        )

    sides = pages.read(request, load)
    same_output = sides[0].trial.outcome.output == sides[1].trial.outcome.output
    return pages.render(
        request,
        "diff.html",
        nav_current="compare",
        task_id=task_id,
        sides=sides,
        same_output=same_output,
    )


def compare_form(request: Request) -> Response:
    """`/compare` without runs: the form to choose them."""
    if request.query_params:
        return compare_page(request)
    return pages.render(request, "compare_form.html", nav_current="compare")


routes: list[BaseRoute] = [
    Route("/compare", compare_form, methods=["GET"], name="compare"),
    Route("/diff", diff_page, methods=["GET"], name="diff"),
]
