"""The viewer's application in-process (Starlette's test client): the CSRF hook for later
POST routes, redaction of what is served, the trial filter and paging, the runs list, and
`trialkit view` without the `view` extra."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app
from trialkit.view.routes.trials import TRIALS_PER_PAGE, matching_tasks
from trialkit.view.security import CSP, SESSION_COOKIE, csrf_protected, csrf_token

SECRET = "sk-test-0123456789abcdefSECRET"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp("app")
    with Store(sqlite_url(folder / "view.db")) as opened:
        for number in range(53):
            suite = Suite(
                id="listed" if number % 2 else "other",
                kind="capability",
                trials=1,
                harness=lambda prompt: "fine",
                tasks=[Task(id="t", input="x", graders=[graders.contains("fine")])],
            )
            run_sync(suite, store=opened, name=f"run-{number:02d}")
        wide = Suite(
            id="wide",
            kind="capability",
            trials=TRIALS_PER_PAGE + 5,
            harness=lambda prompt: f"said {SECRET}" if "leak" in prompt else "ok",
            tasks=[
                Task(id="leak-one", input="leak", graders=[graders.contains("ok")]),
                Task(id="quiet-two", input="quiet", graders=[graders.contains("ok")]),
            ],
        )
        run_sync(wide, store=opened, name="wide")
        yield opened


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    app = create_app(store, allowed_hosts={"testserver"})

    async def token(request: Request) -> Response:
        return PlainTextResponse(csrf_token(request))

    async def change(request: Request) -> Response:
        return PlainTextResponse("changed")

    app.router.routes[:0] = [
        Route("/test/token", token, methods=["GET"]),
        Route("/test/change", csrf_protected(change), methods=["POST"]),
    ]
    with TestClient(app) as opened:
        yield opened


# --- the CSRF hook --------------------------------------------------------------------------


def test_a_post_needs_the_sessions_csrf_token(client: TestClient) -> None:
    fresh = client.get("/test/token")
    assert SESSION_COOKIE in fresh.headers["set-cookie"]
    assert (
        "HttpOnly" in fresh.headers["set-cookie"]
        and "SameSite=Strict" in fresh.headers["set-cookie"]
    )
    token = fresh.text
    assert client.get("/test/token").text == token  # the same session, the same token
    assert "set-cookie" not in client.get("/test/token").headers

    refused = client.post("/test/change")
    assert refused.status_code == 403 and "CSRF token" in refused.text
    assert refused.headers["content-security-policy"] == CSP
    assert client.post("/test/change", data={"csrf_token": "0" * 64}).status_code == 403
    assert client.post("/test/change", data={"csrf_token": token}).text == "changed"
    assert client.post("/test/change", headers={"X-CSRF-Token": token}).text == "changed"

    other_site = client.post(
        "/test/change", data={"csrf_token": token}, headers={"Origin": "http://evil.example"}
    )
    assert other_site.status_code == 403

    client.cookies.clear()  # another browser: the token of this session is not its
    assert client.post("/test/change", data={"csrf_token": token}).status_code == 403


def test_routes_without_post_refuse_it_with_405(client: TestClient) -> None:
    for path in ("/", "/runs/wide", "/api/runs", "/static/view.css"):
        response = client.post(path)
        assert response.status_code == 405, path
        assert response.headers["allow"] == "GET, HEAD", path


def test_other_hosts_are_refused(client: TestClient) -> None:
    response = client.get("/", headers={"Host": "evil.example"})
    assert response.status_code == 403 and "loopback" in response.text
    assert response.headers["x-frame-options"] == "DENY"


# --- redaction ------------------------------------------------------------------------------


def test_no_served_body_shows_a_secret(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret stored before trialkit knew it (here: the variable is set afterwards)."""
    monkeypatch.setenv("VIEW_TEST_API_KEY", SECRET)
    for path in (
        "/runs/wide/trials/leak-one/0",
        "/api/runs/wide/trials/leak-one/0",
        "/api/runs/wide",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        assert SECRET not in response.text and "[REDACTED]" in response.text, path
        assert int(response.headers["content-length"]) == len(response.content)


def test_head_says_the_length_of_the_get(client: TestClient) -> None:
    got = client.get("/runs/wide")
    head = client.head("/runs/wide")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == got.headers["content-length"]


# --- the lists ------------------------------------------------------------------------------


def test_a_task_filter_names_a_task_or_matches_a_glob_or_part_of_ids() -> None:
    ids = ["paris <b>&? 100%", "paris", "spain", "Paris-2", "a[1]"]
    assert matching_tasks(ids, "paris") == ["paris"]  # exact wins
    assert matching_tasks(ids, "paris <b>&? 100%") == ["paris <b>&? 100%"]
    assert matching_tasks(ids, "par*") == ["paris <b>&? 100%", "paris"]  # globs are exact-case
    assert matching_tasks(ids, "PAR") == ["paris <b>&? 100%", "paris", "Paris-2"]
    assert matching_tasks(ids, "a[[]1]") == ["a[1]"]
    assert matching_tasks(ids, "nothing") == []


def test_the_trial_list_pages_and_says_where_it_is(client: TestClient) -> None:
    total = 2 * (TRIALS_PER_PAGE + 5)
    first = client.get("/runs/wide/trials").text
    assert f"Showing 1–{TRIALS_PER_PAGE} of {total}" in first
    assert 'rel="next" href="/runs/' in first and 'rel="prev"' not in first
    last = client.get("/runs/wide/trials?page=3").text
    assert f"Showing 201–{total} of {total}" in last and 'rel="next"' not in last
    beyond = client.get("/runs/wide/trials?page=9").text
    assert f"of {total}" in beyond and "No trial matches" in beyond

    quiet = client.get("/runs/wide/trials?task=QUIET&page=2").text
    assert f"Showing 101–{TRIALS_PER_PAGE + 5} of {TRIALS_PER_PAGE + 5}" in quiet
    assert "leak-one" not in quiet
    assert re.search(r'href="/runs/[^/"]+/trials\?page=1&amp;task=QUIET"', quiet)  # filters kept
    assert client.get("/runs/wide/trials?task=nothing").text.count("No trial matches") == 1
    assert client.get("/runs/wide/trials?page=0").status_code == 400
    assert client.get("/runs/wide/trials?page=x").status_code == 400


def test_the_runs_list_filters_and_pages(client: TestClient) -> None:
    home = client.get("/").text
    assert "Showing 1–50 of 54" in home and "run-52" in home and "run-01" not in home
    second = client.get("/?page=2").text
    assert "Showing 51–54 of 54" in second and "run-00" in second
    listed = client.get("/?suite=listed").text
    assert "of 26" in listed and "run-01" in listed and "run-02" not in listed
    named = client.get("/?name=RUN-0&page=1").text  # part of the name, in any case
    assert "Showing 1–10 of 10" in named and "run-09" in named and "run-10" not in named
    assert 'rel="next"' not in named
    paged = client.get("/?status=completed&sort=name&order=asc").text  # the filters are kept
    assert 'rel="next" href="/?page=2&amp;status=completed&amp;sort=name&amp;order=asc"' in paged
    assert "run-00" in paged and "run-52" not in paged
    assert "of 54" in client.get("/?status=completed").text
    assert client.get("/?status=maybe").status_code == 400


def test_two_trials_of_a_task_side_by_side_by_number(client: TestClient) -> None:
    page = client.get("/diff?task=quiet-two&a=wide&b=wide&a_trial=0&b_trial=3")
    assert page.status_code == 200
    assert "#0" in page.text and "#3" in page.text
    assert "The outputs are the same." in page.text


# --- the extra ------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["starlette", "uvicorn", "jinja2"])
def test_the_command_without_the_view_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: str
) -> None:
    for name in list(sys.modules):
        if name == "trialkit.view" or name.startswith(("trialkit.view.", f"{missing}.")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # `import` fails as if not installed

    result = CliRunner().invoke(cli, ["view", "--store", sqlite_url(tmp_path / "x.db")])

    assert result.exit_code == 2
    assert result.stderr == f"error: trialkit view needs {missing}: pip install 'trialkit[view]'\n"
