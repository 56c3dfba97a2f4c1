"""Full-text search over the store's trials (`/search?q=…`), with the filters of
`trialkit.store.search.search`; each hit links to its trial."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from trialkit.score import Verdict
from trialkit.store import RunNotFound, Store, StoreError, browse
from trialkit.store import search as full_text
from trialkit.view import pages

HITS_PER_PAGE = 50
TEXT_FILTERS = ("grader", "tool", "error_type", "run", "suite")


def search_page(request: Request) -> Response:
    query = request.query_params
    q = (query.get("q") or "").strip()
    verdict = pages.choice(request, "verdict", [v.value for v in Verdict])
    texts = {name: (query.get(name) or "").strip() for name in TEXT_FILTERS}
    score_min = pages.real_number(request, "score_min")
    score_max = pages.real_number(request, "score_max")
    if score_min is not None and score_max is not None and score_min > score_max:
        raise pages.BadRequest(f"score_min {score_min:g} is above score_max {score_max:g}")
    number = pages.page_number(request)

    def load(store: Store) -> tuple[list[str], full_text.SearchPage | None, str | None]:
        suites = browse.facets(store).suites
        if not q:
            return suites, None, None
        run = texts["run"]
        try:
            run_id = store.resolve_run(run) if run else None
        except RunNotFound as exc:
            raise pages.BadRequest(str(exc).strip("'\"")) from exc
        try:
            found = full_text.search(
                store,
                q,
                verdict=verdict or None,
                grader=texts["grader"] or None,
                score_min=score_min,
                score_max=score_max,
                tool=texts["tool"] or None,
                error_type=texts["error_type"] or None,
                run=run_id,
                suite=texts["suite"] or None,
                offset=(number - 1) * HITS_PER_PAGE,
                limit=HITS_PER_PAGE,
            )
        except StoreError as exc:  # a store written before the search index, above all
            return suites, None, str(exc)
        return suites, found, None

    suites, found, unavailable = pages.read(request, load)
    filters: dict[str, pages.QueryValue] = {
        "q": q,
        "verdict": verdict,
        **texts,
        "score_min": query.get("score_min") or "",
        "score_max": query.get("score_max") or "",
    }
    return pages.render(
        request,
        "search.html",
        status_code=503 if unavailable else 200,
        nav_current="search",
        q=q,
        filters=filters,
        verdicts=[v.value for v in Verdict],
        suites=suites,
        found=found,
        unavailable=unavailable,
        paging=None
        if found is None
        else pages.Paging(number, HITS_PER_PAGE, found.total, len(found.hits)),
    )


routes: list[BaseRoute] = [Route("/search", search_page, methods=["GET"], name="search")]
