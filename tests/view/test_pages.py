"""The viewer's Runs, Trends, Matrix and Search pages in-process (Starlette's test client):
filters, sorts, paging totals, 400s that say why, and hostile stored text escaped in matrix
cells, search snippets and chart tooltips."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from trialkit import Suite, Task, graders, run_sync
from trialkit.store import Store
from trialkit.store.browse import TrendPoint
from trialkit.store.urls import sqlite_url
from trialkit.view import charts
from trialkit.view.app import create_app

XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def alpha(round_: int) -> Suite:
    def harness(prompt: str) -> str:
        if "hostile" in prompt:
            return f"said {XSS} loudly"
        if "flip" in prompt:
            return "yes" if round_ % 2 else "no"
        if "never" in prompt:
            return "no"
        return "yes"

    return Suite(
        id="alpha",
        kind="capability",
        trials=2,
        harness=harness,
        tasks=[
            Task(id="always", input="always", graders=[graders.contains("yes")]),
            Task(id="flip", input="flip", graders=[graders.contains("yes")]),
            Task(id="never", input="never", graders=[graders.contains("yes")]),
            Task(id="hostile", input="hostile", graders=[graders.contains("loudly")]),
        ],
    )


def chat() -> Suite:
    return Suite(
        id="chat",
        kind="regression",
        trials=1,
        model="scripted/echo",
        tasks=[Task(id="echo", input="paris", graders=[graders.contains("paris")])],
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp("pages")
    with Store(sqlite_url(folder / "view.db")) as opened:
        run_sync(alpha(0), store=opened, name="alpha-first")
        run_sync(alpha(1), store=opened, name=XSS)
        run_sync(alpha(2), store=opened, name="alpha-third")
        run_sync(chat(), store=opened, name="chat-only")
        yield opened


@pytest.fixture(scope="module")
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store, allowed_hosts={"testserver"})) as opened:
        yield opened


def ids(store: Store) -> dict[str, str]:
    return {run.name or "": run.id for run in store.list_runs()}


def listed(body: str) -> list[str]:
    """The run ids of the list of runs, in order."""
    return re.findall(r'<input type="checkbox" name="run" value="([^"]+)"', body)


def bad(client: TestClient, path: str, *words: str) -> None:
    response = client.get(path)
    assert response.status_code == 400, (path, response.text[-500:])
    for word in words:
        assert word in response.text, (path, word)


# --- runs -----------------------------------------------------------------------------------


def test_runs_filter_by_suite_model_name_and_dates(client: TestClient, store: Store) -> None:
    named = ids(store)
    assert listed(client.get("/").text) == [
        named["chat-only"],
        named["alpha-third"],
        named[XSS],
        named["alpha-first"],
    ]
    assert len(listed(client.get("/?suite=alpha").text)) == 3
    assert listed(client.get("/?model=scripted%2Fecho").text) == [named["chat-only"]]
    assert listed(client.get("/?name=ALPHA-").text) == [named["alpha-third"], named["alpha-first"]]
    today = datetime.now(UTC).date()
    assert len(listed(client.get(f"/?since={today}&until={today}").text)) == 4
    assert listed(client.get(f"/?since={today + timedelta(days=1)}").text) == []
    assert listed(client.get(f"/?until={today - timedelta(days=1)}").text) == []
    nothing = client.get("/?name=no-such-name").text
    assert "No run matches." in nothing and "Showing 0–0 of 0" in nothing

    home = client.get("/").text
    for option in ("alpha", "chat", "scripted/echo"):
        assert f'<option value="{option}">{option}</option>' in home  # the dropdowns
    chosen = client.get("/?suite=chat").text
    assert '<option value="chat" selected>chat</option>' in chosen
    assert ESCAPED in home and XSS not in home


def test_runs_sort_by_each_column_both_ways(client: TestClient, store: Store) -> None:
    named = ids(store)
    by_name = listed(client.get("/?sort=name&order=asc").text)
    assert by_name == [named[n] for n in sorted(named)]
    assert listed(client.get("/?sort=name&order=desc").text) == by_name[::-1]
    oldest = listed(client.get("/?sort=started&order=asc").text)
    assert oldest == listed(client.get("/").text)[::-1]
    for column in ("run", "suite", "model", "status", "duration", "pass_rate", "errors", "cost"):
        for order in ("asc", "desc"):
            page = client.get(f"/?sort={column}&order={order}")
            assert page.status_code == 200 and len(listed(page.text)) == 4, (column, order)
    best = [named[n] for n in ("chat-only", XSS, "alpha-third", "alpha-first")]
    assert listed(client.get("/?sort=pass_rate").text) == best  # a figure starts high
    worst = [named[n] for n in ("alpha-third", "alpha-first", XSS, "chat-only")]
    assert listed(client.get("/?sort=pass_rate&order=asc").text) == worst  # ties: newest first
    body = client.get("/?sort=name&order=asc&suite=alpha").text
    assert 'aria-sort="ascending"' in body
    # the heading of the sorted column turns it round, and keeps the filters
    assert 'href="/?suite=alpha&amp;sort=name&amp;order=desc"' in body
    assert 'href="/?suite=alpha&amp;sort=cost&amp;order=desc"' in body


def test_runs_refuse_bad_parameters_saying_why(client: TestClient) -> None:
    bad(client, "/?sort=colour", "sort", "colour", "pass_rate")
    bad(client, "/?order=up", "order", "asc, desc")
    bad(client, "/?since=yesterday", "since", "expected a date")
    bad(client, "/?until=2026-13-01", "until")
    bad(client, "/?status=maybe", "status")
    bad(client, "/?page=0", "page")


def test_runs_selected_go_to_compare_and_to_the_matrix(client: TestClient, store: Store) -> None:
    home = client.get("/").text
    assert '<form id="selected-runs" class="selected-runs" method="get" action="/compare">' in home
    assert 'formaction="/matrix"' in home and "Compare selected" in home
    named = ids(store)
    first, third = named["alpha-first"], named["alpha-third"]
    compared = client.get(f"/compare?run={first}&run={third}")
    assert compared.status_code == 200, compared.text[-500:]
    assert f"/matrix?run={first}&amp;run={third}" in compared.text  # the compare page links it
    bad(client, f"/compare?run={first}", "two runs")


# --- matrix ---------------------------------------------------------------------------------


def test_the_matrix_of_runs_escapes_outputs_and_links_trials(
    client: TestClient, store: Store
) -> None:
    named = ids(store)
    first, second = named["alpha-first"], named[XSS]
    page = client.get(f"/matrix?run={first}&run=alpha-third")
    assert page.status_code == 200, page.text[-500:]
    body = page.text
    assert f"said {ESCAPED} loudly" in body and XSS not in body
    assert f'href="/runs/{first}/trials/hostile/0"' in body
    assert "4 tasks." in body and "Showing 1–4 of 4" in body
    assert body.index(">always<") < body.index(">flip<") < body.index(">hostile<")
    assert "verdict-pass" in body and "verdict-fail" in body

    filtered = client.get(f"/matrix?run={first}&run={second}&task=FL").text
    assert "1 task matches." in filtered and ">always<" not in filtered
    assert 'name="run" value="' + second + '"' in filtered  # the filter keeps the runs

    heads = re.compile(r'<th scope="col"><a href="/runs/([^"]+)">')
    ticked = client.get(f"/matrix?run=alpha-third&run={first}").text  # ticked: oldest first
    assert heads.findall(ticked) == [first, named["alpha-third"]]
    lettered = client.get(f"/matrix?a=alpha-third&b={first}").text  # named: as named
    assert heads.findall(lettered) == [named["alpha-third"], first]

    by_suite = client.get("/matrix?suite=alpha&last=2").text
    assert named["alpha-third"] in by_suite and first not in by_suite
    assert "Last 2 runs of" in by_suite


def test_the_matrix_pages_tasks(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialkit.view.routes import matrix

    monkeypatch.setattr(matrix, "TASKS_PER_PAGE", 3)
    second = client.get("/matrix?suite=alpha&page=2").text
    assert "Showing 4–4 of 4" in second and ">hostile<" in second and ">always<" not in second
    assert 'rel="prev" href="/matrix?page=1&amp;suite=alpha&amp;last=5"' in second
    beyond = client.get("/matrix?suite=alpha&page=7").text
    assert "Showing 0–0 of 4" in beyond and "No task matches." in beyond


def test_the_matrix_refuses_bad_parameters(client: TestClient) -> None:
    bad(client, "/matrix", "a matrix needs runs")
    bad(client, "/matrix?suite=alpha&run=alpha-first", "not both")
    bad(client, "/matrix?suite=alpha&last=0", "last")
    bad(client, "/matrix?suite=alpha&last=999", "at most 20")
    assert client.get("/matrix?run=no-such-run").status_code == 404
    assert client.get("/matrix?suite=no-such-suite").status_code == 404


# --- search ---------------------------------------------------------------------------------


def test_search_shows_the_form_alone_without_words(client: TestClient) -> None:
    page = client.get("/search")
    assert page.status_code == 200
    assert '<form class="filters search-form" method="get" action="/search">' in page.text
    assert "<table" not in page.text and 'aria-current="page">Search' in page.text


def test_search_marks_the_match_and_escapes_the_rest(client: TestClient, store: Store) -> None:
    body = client.get("/search?q=alert").text
    assert "6 matches" in body, body[-2000:]  # two trials' hostile outputs in each alpha run
    assert "<mark>alert</mark>" in body
    assert "said &lt;script&gt;<mark>alert</mark>(1)&lt;/script&gt; loudly" in body
    assert XSS not in body
    assert re.search(r'href="/runs/[^"]+/trials/hostile/0"', body)

    assert "0 matches" in client.get("/search?q=alert&verdict=fail").text
    assert "6 matches" in client.get("/search?q=alert&suite=alpha&verdict=pass").text
    one = client.get(f"/search?q=alert&run={quote(XSS)}").text
    assert "2 matches" in one and ids(store)[XSS] in one
    assert "0 matches" in client.get("/search?q=alert&suite=chat").text
    scored = client.get("/search?q=alert&grader=contains&score_min=0.5").text
    assert "matches" in scored


def test_search_pages_its_hits_keeping_the_filters(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialkit.view.routes import search

    monkeypatch.setattr(search, "HITS_PER_PAGE", 4)
    first = client.get("/search?q=alert&verdict=pass").text
    assert "Showing 1–4 of 6" in first and first.count("<mark>") == 4
    assert 'rel="next" href="/search?page=2&amp;q=alert&amp;verdict=pass"' in first
    second = client.get("/search?q=alert&verdict=pass&page=2").text
    assert "Showing 5–6 of 6" in second and second.count("<mark>") == 2
    assert '<option value="pass" selected>pass</option>' in second  # the form keeps them


def test_search_refuses_bad_parameters(client: TestClient) -> None:
    bad(client, "/search?q=x&score_min=lots", "score_min", "number")
    bad(client, "/search?q=x&score_min=nan", "score_min")
    bad(client, "/search?q=x&score_min=0.9&score_max=0.1", "above")
    bad(client, "/search?q=x&verdict=maybe", "verdict")
    bad(client, "/search?q=x&run=no-such-run", "no-such-run")


def test_search_says_when_the_store_has_no_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(sqlite_url(path)) as fresh:
        run_sync(chat(), store=fresh)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE search_docs")
    with Store(sqlite_url(path)) as old, TestClient(create_app(old, allowed_hosts=None)) as c:
        page = c.get("/search?q=paris")
        assert c.get("/search").status_code == 200  # the form alone needs no index
    assert page.status_code == 503
    assert "Search is not available" in page.text and "no search index" in page.text


# --- trends ---------------------------------------------------------------------------------


def test_trends_list_the_suites_with_their_last_run(client: TestClient, store: Store) -> None:
    body = client.get("/trends").text
    assert 'href="/trends/alpha"' in body and 'href="/trends/chat"' in body
    assert ids(store)["alpha-third"] in body and ids(store)["alpha-first"] not in body
    assert 'aria-current="page">Trends' in body


def test_a_suite_s_trend_charts_strips_and_health(client: TestClient, store: Store) -> None:
    named = ids(store)
    body = client.get("/trends/alpha").text
    assert body.count('<svg class="chart"') == 3  # pass rate, errors, latency
    assert "No run has this figure yet." in body  # cost: unknown for a function harness
    assert body.count('<circle class="dot series-1"') == 3 + 3 + 3  # a point a run a chart
    assert '<polygon class="band"' in body and '<polyline class="line series-1"' in body
    assert f"<title>pass rate: 50.0% · run {named['alpha-first']}" in body
    assert f"<title>pass^2: 50.0% · run {named['alpha-first']}" in body
    assert f"({ESCAPED})" in body and XSS not in body  # a run name in a tooltip
    assert "style=" not in body and "<style" not in body
    assert f'<a href="/runs/{named["alpha-first"]}"><circle' in body
    # the history strip: a cell per run, linking to the task's trials in it
    strip = re.search(r'"task-id">flip</span></th>\s*<td class="strip">(.*?)</td>', body)
    assert strip, body
    cells = re.findall(r'class="cell verdict-(\w+)" href="([^"]+)"', strip.group(1))
    assert [v for v, _ in cells] == ["fail", "pass", "fail"]
    assert cells[0][1] == f"/runs/{named['alpha-first']}/trials?task=flip"
    # health
    assert "Broken" in body and "never passed" in body and "Flaky" in body
    assert "Discrimination" in body


def test_a_suite_with_one_run_or_none_renders(client: TestClient) -> None:
    one = client.get("/trends/chat")
    assert one.status_code == 200
    assert "One run so far" in one.text and one.text.count('<svg class="chart"') == 4
    assert one.text.count("<circle") == 2 + 1 + 1 + 2
    assert "saturation and trends need" in one.text
    none = client.get("/trends/no-such-suite")
    assert none.status_code == 404 and "No run of suite no-such-suite" in none.text
    bad(client, "/trends/alpha?last=0", "last")


def test_a_chart_breaks_its_line_where_a_run_has_no_figure() -> None:
    start = datetime(2026, 12, 1, tzinfo=UTC)

    def point(i: int, rate: float | None) -> TrendPoint:
        return TrendPoint(
            run_id=f"r{i}",
            name=None,
            started_at=start + timedelta(days=i),
            model=None,
            trials=1,
            passed=1,
            failed=0,
            errors=0,
            pass_rate=rate,
            pass_rate_ci=None if rate is None else (rate / 2, rate),
            k=None,
            pass_hat_k=None,
            cost_usd=None,
            mean_latency_s=None,
            latency_p50_s=None,
            latency_p95_s=None,
        )

    points = [point(0, 0.5), point(1, 1.0), point(2, None), point(3, 0.25)]
    rate: list[tuple[str, charts.Value]] = [("rate", lambda p: p.pass_rate)]
    drawn = charts.chart("rate", points, rate, str, top=1.0, band=lambda p: p.pass_rate_ci)
    (series,) = drawn.series
    assert len(series.dots) == 3 and len(series.lines) == 1  # the lone last point has no line
    assert len(drawn.bands) == 2
    assert [t for _, t in drawn.x_ticks] == ["2026-12-01", "2026-12-04"]
    assert series.dots[1].y == charts.TOP and series.dots[0].href == "/runs/r0"
    lone = charts.chart("one", points[:1], rate, str, top=1.0)
    assert lone.series[0].dots[0].x == charts.LEFT + (charts.WIDTH - charts.RIGHT - charts.LEFT) / 2
    assert charts.chart("none", [], rate, str).empty


# --- the header -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "current"),
    [
        ("/", "Runs"),
        ("/trends", "Trends"),
        ("/trends/alpha", "Trends"),
        ("/search", "Search"),
        ("/compare", "Compare"),
        ("/matrix?suite=alpha", "Compare"),
    ],
)
def test_the_header_marks_the_current_section(client: TestClient, path: str, current: str) -> None:
    body = client.get(path).text
    marked = re.findall(r'<a href="[^"]*" aria-current="page">(\w+)</a>', body)
    assert marked == [current], (path, marked)


def test_an_axis_ends_on_a_round_number_above_the_largest_value() -> None:
    assert charts.nice_ceiling(0) == 1.0
    assert charts.nice_ceiling(2) == 4.0  # ticks 0, 2, 4
    assert charts.nice_ceiling(0.07) == 0.08
    assert charts.nice_ceiling(0.5) == 0.6
    assert charts.nice_ceiling(150) == 200.0


def test_the_pages_of_an_empty_store(tmp_path: Path) -> None:
    with (
        Store(sqlite_url(tmp_path / "empty.db")) as empty,
        TestClient(create_app(empty, allowed_hosts=None)) as c,
    ):
        assert "No runs yet" in c.get("/").text
        assert "No runs yet" in c.get("/trends").text
        assert "0 matches" in c.get("/search?q=anything").text
        assert c.get("/trends/anything").status_code == 404
        assert c.get("/matrix?suite=anything").status_code == 404
