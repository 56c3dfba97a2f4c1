"""The Runs, Trends, Matrix and Search pages in a real browser: reached from the home page
without console errors or CSP violations; a filter and a sort of the runs; ticked runs
compared; a search that opens the trial it found; the matrix opening a trial; the trends
page in both themes; screenshots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.view.browser.conftest import Watched
from tests.view.browser.stores import HOSTILE
from trialkit.store import Store

OpenPage = Callable[..., Watched]


def settle(watched: Watched) -> None:
    watched.page.wait_for_load_state("load")


def run_ids_listed(watched: Watched) -> list[str]:
    found: list[str] = watched.page.eval_on_selector_all(
        "table.runs input[name=run]", "es => es.map(e => e.value)"
    )
    return found


def test_each_new_page_is_reached_from_home_without_errors(open_page: OpenPage) -> None:
    watched = open_page()
    page = watched.page
    watched.goto("/")
    for label, heading in [("Trends", "Trends"), ("Search", "Search trials"), ("Runs", "Runs")]:
        page.locator("nav.site-nav a", has_text=label).click()
        settle(watched)
        assert page.locator("h1").inner_text().strip() == heading
        current = page.locator("nav.site-nav a[aria-current=page]")
        assert current.inner_text() == label
    page.locator("table.runs a", has_text="workspace").first.click()  # a suite's trend
    settle(watched)
    assert "/trends/workspace" in page.url
    assert page.locator("svg.chart").count() >= 3
    assert page.locator("svg.chart circle.dot").first.is_visible()
    page.locator("a", has_text="the last runs as a matrix").click()
    settle(watched)
    assert page.locator("table.matrix tbody tr").count() == 4
    assert watched.errors == [] and watched.dialogs == []


def test_the_runs_filter_and_sort(open_page: OpenPage, store: Store) -> None:
    watched = open_page()
    page = watched.page
    watched.goto("/")
    assert len(run_ids_listed(watched)) == 4
    page.select_option("select[name=suite]", "workspace")
    page.click("form.filters button[type=submit]")
    settle(watched)
    assert "suite=workspace" in page.url
    before, after = store.resolve_run("before"), store.resolve_run("after")
    assert run_ids_listed(watched) == [after, before]  # newest first
    assert "Showing 1–2 of 2" in page.locator("nav.paging").first.inner_text()

    page.locator("thead a.sort", has_text="Name").click()  # A to Z first
    settle(watched)
    assert "sort=name" in page.url and "suite=workspace" in page.url
    assert run_ids_listed(watched) == [after, before]  # "after" < "before"
    assert page.locator("th[aria-sort=ascending]").inner_text().startswith("Name")
    page.locator("thead a.sort", has_text="Name").click()  # then Z to A
    settle(watched)
    assert run_ids_listed(watched) == [before, after]
    assert page.locator("th[aria-sort=descending]").count() == 1

    page.fill("input[name=name]", "MAN")  # part of a name, in any case
    page.select_option("select[name=suite]", "")
    page.click("form.filters button[type=submit]")
    settle(watched)
    assert run_ids_listed(watched) == [store.resolve_run("many")]
    assert watched.errors == []


@pytest.mark.parametrize("javascript", [True, False])
def test_ticked_runs_are_compared(open_page: OpenPage, store: Store, javascript: bool) -> None:
    watched = open_page(java_script_enabled=javascript)
    page = watched.page
    watched.goto("/?suite=workspace")
    for name in ("before", "after"):
        page.check(f"table.runs input[value='{store.resolve_run(name)}']")
    page.locator("button", has_text="Compare selected").click()
    settle(watched)
    assert "/compare?run=" in page.url
    assert "Fixed in B" in page.locator("main").inner_text()  # the older run is A
    page.locator("a", has_text="These runs as a matrix").click()
    settle(watched)
    assert page.locator("table.matrix thead th").count() == 3
    assert watched.errors == []


def test_a_search_finds_a_trial_and_opens_it(open_page: OpenPage, store: Store) -> None:
    watched = open_page()
    page = watched.page
    watched.goto("/search")
    assert page.locator("table.hits").count() == 0  # the form alone
    page.fill("input[name=q]", "onerror")
    page.fill("input[name=run]", "before")
    page.click("form.search-form button[type=submit]")
    settle(watched)
    assert page.locator("mark").first.inner_text() == "onerror"
    snippet = page.locator("td.snippet").first.inner_text()
    assert "<img src=x " in snippet  # hostile text, shown as text
    assert page.locator("main img").count() == 0
    page.locator("table.hits tbody tr", has_text="hostile <b>").locator("a").first.click()
    settle(watched)
    assert "/trials/" in page.url and store.resolve_run("before") in page.url
    assert page.locator("pre.output").inner_text() == HOSTILE
    assert watched.errors == [] and watched.dialogs == []


def test_the_matrix_opens_a_trial(open_page: OpenPage) -> None:
    watched = open_page()
    page = watched.page
    watched.goto("/matrix?suite=workspace")
    clip = page.locator("table.matrix tr", has_text="spain").locator(".clip").first
    assert clip.inner_text() == "Berlin"
    hostile = page.locator("table.matrix tr", has_text="hostile").locator(".clip").first
    assert hostile.inner_text() == HOSTILE
    clipped = hostile.evaluate("e => [getComputedStyle(e).overflow, getComputedStyle(e).maxHeight]")
    assert clipped[0] == "hidden" and clipped[1].endswith("px")  # a long output is cut by CSS
    page.locator("table.matrix tr", has_text="spain").locator("a.cell-link").first.click()
    settle(watched)
    assert "/trials/spain/0" in page.url
    assert page.locator("pre.output").inner_text() == "Berlin"
    assert watched.errors == [] and watched.dialogs == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_trends_page_in_both_themes(
    open_page: OpenPage, screenshots: Path, scheme: str
) -> None:
    watched = open_page(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    page = watched.page
    shots = {
        "trends": "/trends/workspace",
        "matrix": "/matrix?suite=workspace",
        "search": "/search?q=onerror",
    }
    assert watched.goto(shots["trends"]) == 200
    line = page.eval_on_selector("svg.chart .line", "e => getComputedStyle(e).stroke")
    text = page.eval_on_selector("svg.chart .axis text", "e => getComputedStyle(e).fill")
    background = page.eval_on_selector("body", "e => getComputedStyle(e).backgroundColor")
    assert line not in ("none", "", background) and text != background
    cell = page.eval_on_selector("td.strip .cell", "e => getComputedStyle(e).backgroundColor")
    assert cell != background
    tooltip = page.locator("svg.chart circle.dot.series-1 title").first.text_content() or ""
    assert tooltip.startswith("pass rate: ") and "run " in tooltip
    for name, path in shots.items():
        assert watched.goto(path) == 200
        page.screenshot(path=str(screenshots / f"{name}-{scheme}.png"), full_page=True)
    assert watched.errors == []


def test_the_charts_follow_the_theme_without_javascript(open_page: OpenPage) -> None:
    colours = {}
    for scheme in ("light", "dark"):
        watched = open_page(color_scheme=scheme, java_script_enabled=False)
        watched.goto("/trends/workspace")
        colours[scheme] = watched.page.eval_on_selector(
            "svg.chart .axis text", "e => getComputedStyle(e).fill"
        )
        assert watched.page.locator("svg.chart circle.dot").count() >= 6
        assert watched.errors == []
    assert colours["light"] != colours["dark"]
