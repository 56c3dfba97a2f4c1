"""The viewer in a real browser: every page reached from the home page renders with no
console error and no CSP violation, in both themes, with and without JavaScript; the trial
filter and paging work; hostile stored text is shown as text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import pytest

from tests.view.browser.conftest import Watched
from tests.view.browser.stores import HOSTILE, MANY_TRIALS
from trialkit.store import Store

OpenPage = Callable[..., Watched]
MAX_PAGES = 60


def run_id(store: Store, name: str) -> str:
    return store.resolve_run(name)


def links(watched: Watched) -> list[str]:
    hrefs: list[str] = watched.page.eval_on_selector_all(
        "a[href]", "elements => elements.map(e => e.getAttribute('href'))"
    )
    return hrefs


def test_every_page_reached_from_home_renders_cleanly(open_page: OpenPage) -> None:
    watched = open_page()
    seen: set[str] = set()
    queue = ["/", "/compare?a=before&b=after"]  # the comparison is reached through a form
    while queue and len(seen) < MAX_PAGES:
        path = queue.pop(0)
        if path in seen or path.startswith("/api/"):
            continue
        seen.add(path)
        assert watched.goto(path) == 200, path
        assert watched.page.locator("h1").inner_text().strip(), path
        for href in links(watched):
            target = urljoin(path, href)
            if urlsplit(target).netloc == "" and not href.startswith("#"):
                queue.append(target.split("#", 1)[0])
    assert watched.errors == [], watched.errors
    assert watched.dialogs == []
    assert len(seen) >= 20, sorted(seen)
    assert any(p.startswith("/diff?") for p in seen) and any("/trials/" in p for p in seen)


def test_a_csp_violation_would_be_caught(open_page: OpenPage) -> None:
    """The watch itself works: an inline script is refused and reported."""
    watched = open_page()
    watched.goto("/")
    watched.page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.ran = 1'; document.body.append(s); }"
    )
    for _ in range(100):  # the violation is reported asynchronously
        if watched.errors:
            break
        watched.page.wait_for_timeout(50)
    assert watched.page.evaluate("() => window.ran") is None
    assert any("CSP violation: script-src" in e for e in watched.errors), watched.errors


def colors(watched: Watched, selector: str = "body") -> tuple[str, str]:
    found: list[str] = watched.page.eval_on_selector(
        selector, "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).color]"
    )
    return found[0], found[1]


def luminance(color: str) -> float:
    channels = [int(x) / 255 for x in color[color.index("(") + 1 : color.index(")")].split(",")[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("javascript", [True, False])
def test_light_and_dark_themes_follow_the_system(
    open_page: OpenPage, store: Store, javascript: bool
) -> None:
    found = {}
    for scheme in ("light", "dark"):
        watched = open_page(color_scheme=scheme, java_script_enabled=javascript)
        watched.goto(f"/runs/{run_id(store, 'before')}")
        background, text = colors(watched)
        assert contrast(background, text) >= 7, (scheme, background, text)
        _, muted = colors(watched, ".subtitle")
        assert contrast(background, muted) >= 4.5, (scheme, background, muted)
        toggle = watched.page.locator("#theme-toggle")
        assert toggle.is_visible() is javascript  # the toggle needs JavaScript
        found[scheme] = background
        assert watched.errors == []
    assert found["light"] != found["dark"]
    assert luminance(found["light"]) > luminance(found["dark"])


def test_the_toggle_switches_the_theme_and_remembers_it(open_page: OpenPage) -> None:
    watched = open_page(color_scheme="light")
    watched.goto("/")
    light = colors(watched)[0]
    watched.page.click("#theme-toggle")
    assert watched.page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    dark = colors(watched)[0]
    assert luminance(dark) < luminance(light)
    watched.goto("/compare")  # another page of the same browser keeps the choice
    assert colors(watched)[0] == dark
    watched.page.click("#theme-toggle")
    assert colors(watched)[0] == light
    assert watched.errors == []


def test_ids_do_not_wrap(open_page: OpenPage) -> None:
    watched = open_page(viewport={"width": 700, "height": 900})
    watched.goto("/")
    heights: list[float] = watched.page.eval_on_selector_all(
        "table.runs code.id", "es => es.map(e => e.getBoundingClientRect().height)"
    )
    line: float = watched.page.eval_on_selector(
        "table.runs code.id", "e => parseFloat(getComputedStyle(e).lineHeight)"
    )
    assert heights and max(heights) < 1.5 * line, (heights, line)


def rows(watched: Watched) -> list[str]:
    found: list[str] = watched.page.eval_on_selector_all(
        "table.trials tbody tr td:first-child", "es => es.map(e => e.innerText)"
    )
    return found


def test_the_trial_filter_and_paging(open_page: OpenPage, store: Store) -> None:
    watched = open_page()
    many = run_id(store, "many")
    watched.goto(f"/runs/{many}/trials")
    paging = watched.page.locator("nav.paging").first
    assert f"Showing 1–100 of {2 * MANY_TRIALS:,}" in paging.inner_text()
    assert len(rows(watched)) == 100

    watched.page.fill("input[name=task]", "alpha*")
    watched.page.click("form.filters button[type=submit]")
    watched.page.wait_for_load_state("load")
    assert "task=alpha" in watched.page.url
    assert all(row.startswith("alpha-one") for row in rows(watched))
    assert f"Showing 1–100 of {MANY_TRIALS}" in paging.inner_text()

    watched.page.locator("nav.paging a[rel=next]").first.click()
    watched.page.wait_for_load_state("load")
    assert f"Showing 101–{MANY_TRIALS} of {MANY_TRIALS}" in paging.inner_text()
    assert len(rows(watched)) == MANY_TRIALS - 100
    assert watched.page.locator("nav.paging a[rel=next]").count() == 0
    watched.page.locator("nav.paging a[rel=prev]").first.click()
    watched.page.wait_for_load_state("load")
    assert "Showing 1–100" in paging.inner_text()

    watched.page.select_option("select[name=verdict]", "fail")
    watched.page.fill("input[name=task]", "TWO")  # part of an id, any case
    watched.page.click("form.filters button[type=submit]")
    watched.page.wait_for_load_state("load")
    assert all(row.startswith("beta-two") for row in rows(watched))
    assert f"of {MANY_TRIALS}" in paging.inner_text()
    assert watched.errors == []


def test_hostile_output_is_shown_as_text(open_page: OpenPage, store: Store) -> None:
    watched = open_page()
    before = run_id(store, "before")
    task = "hostile <b>&? 100%"
    watched.goto(f"/runs/{before}/trials/{quote(task, safe='')}/0")
    output = watched.page.locator("pre.output").inner_text()
    assert output == HOSTILE
    assert watched.page.locator("img").count() == 0
    assert watched.page.locator("main script").count() == 0
    assert task in watched.page.locator("h1").inner_text()
    watched.goto(f"/runs/{before}/trials/crash/0")
    assert HOSTILE in watched.page.locator("section.trial-error").inner_text()
    watched.goto(f"/diff?task={quote(task)}&a=before&b=after")
    assert watched.page.locator("pre.output").all_inner_texts() == [HOSTILE, HOSTILE]
    assert watched.dialogs == [] and watched.errors == []


def test_a_trial_page_shows_calls_and_the_workspace_diff(open_page: OpenPage, store: Store) -> None:
    watched = open_page()
    watched.goto(f"/runs/{run_id(store, 'tools')}/trials/adds/0")
    page = watched.page
    assert "Use the tools." in page.locator("details.system-prompt").inner_text()
    tool = page.locator("details.tool-call").first
    assert not tool.locator("pre").first.is_visible()  # collapsed
    tool.locator("summary").click()
    assert '"a": 2' in tool.inner_text() and "Result" in tool.inner_text()
    assert page.locator("details.model-call").count() == 2
    watched.goto(f"/runs/{run_id(store, 'before')}/trials/edit/0")
    added = [line.strip() for line in page.locator("pre.diff .line-add").all_inner_texts()]
    removed = [line.strip() for line in page.locator("pre.diff .line-del").all_inner_texts()]
    assert "+TWO" in added and "+four" in added and removed == ["-two"]
    add_bg = page.eval_on_selector("pre.diff .line-add", "e => getComputedStyle(e).backgroundColor")
    del_bg = page.eval_on_selector("pre.diff .line-del", "e => getComputedStyle(e).backgroundColor")
    assert add_bg != del_bg
    assert "thinking about" in page.locator("details.reasoning").first.text_content() or ""
    assert watched.errors == []


def test_compare_links_to_the_trials_side_by_side(open_page: OpenPage) -> None:
    watched = open_page()
    watched.goto("/compare")
    watched.page.fill("form[action='/compare'] input[name=a]", "before")
    watched.page.fill("form[action='/compare'] input[name=b]", "after")
    watched.page.click("form[action='/compare'] button")
    watched.page.wait_for_load_state("load")
    assert "Fixed in B" in watched.page.locator("main").inner_text()
    watched.page.locator("table.compare-tasks a", has_text="spain").first.click()
    watched.page.wait_for_load_state("load")
    columns = watched.page.locator(".column pre.output").all_inner_texts()
    assert columns == ["Berlin", "Madrid"]
    assert watched.errors == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots_of_the_main_pages(
    open_page: OpenPage, store: Store, screenshots: Path, scheme: str
) -> None:
    before, tools = run_id(store, "before"), run_id(store, "tools")
    shots: dict[str, Any] = {
        "runs": "/",
        "run": f"/runs/{before}",
        "trials": f"/runs/{before}/trials",
        "trial-tools": f"/runs/{tools}/trials/adds/0",
        "trial-diff": f"/runs/{before}/trials/edit/0",
        "compare": "/compare?a=before&b=after",
        "diff": "/diff?task=spain&a=before&b=after",
    }
    watched = open_page(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    for name, path in shots.items():
        assert watched.goto(path) == 200
        watched.page.screenshot(path=str(screenshots / f"{name}-{scheme}.png"), full_page=True)
    for name in shots:  # other tests save theirs in the same folder
        assert (screenshots / f"{name}-{scheme}.png").stat().st_size > 0
    assert watched.errors == []
