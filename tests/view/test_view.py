"""`trialkit view`: a real HTTP server on 127.0.0.1 over a real store, read with a real client.

The browser tests (tests/view/browser/) drive Chromium over the same pages."""

from __future__ import annotations

import errno
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlencode, urljoin, urlsplit

import pytest
from click.testing import CliRunner

from tests.store.conftest import BACKENDS, postgres_admin, postgres_schema_url
from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view import ViewServer
from trialkit.view.security import CSP

__all__ = ["postgres_admin"]  # a fixture these tests use

XSS = "<script>alert(1)</script>"
ODD_TASK = "paris <b>&? 100%"  # markup, an ampersand, a query mark and a percent sign


def agent(prompt: str) -> str:
    if "crash" in prompt:
        raise RuntimeError(f"the tool server went away {XSS}")
    if "France" in prompt:
        return f"Paris {XSS}"
    return "Berlin"


def suite(answer_spain: str = "Berlin") -> Suite:
    def harness(prompt: str) -> str:
        return answer_spain if "Spain" in prompt else agent(prompt)

    return Suite(
        id="viewer-demo",
        kind="regression",
        trials=2,
        harness=harness,
        tasks=[
            Task(id=ODD_TASK, input="Capital of France?", graders=[graders.contains("paris")]),
            Task(id="spain", input="Capital of Spain?", graders=[graders.contains("madrid")]),
            Task(id="crash", input="crash please", graders=[graders.contains("x")]),
        ],
    )


@pytest.fixture(scope="module", params=BACKENDS)
def db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The store's URL (password included, for the command's subprocess): a SQLite file, or a
    fresh schema on the test PostgreSQL server."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path_factory.mktemp("view") / "view.db")
        return
    yield from postgres_schema_url(request.getfixturevalue("postgres_admin"))


@pytest.fixture(scope="module")
def store(db_url: str) -> Iterator[Store]:
    with Store(db_url) as store:
        run_sync(suite(), store=store, name="before")
        run_sync(suite(answer_spain="Madrid"), store=store, name="after")
        yield store


@pytest.fixture(scope="module")
def server(store: Store) -> Iterator[ViewServer]:
    with ViewServer(store) as server:
        yield server


def get(
    server: ViewServer, path: str, *, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        headers = {} if host is None else {"Host": host}
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        body = response.read().decode("utf-8")
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body
    finally:
        conn.close()


class Page(HTMLParser):
    """Links, and every element with its attributes, of one page."""

    def __init__(self, body: str) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(body)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def visible(self) -> str:
        return "".join(self.text)


def run_ids(store: Store) -> dict[str, str]:
    return {run.name or "": run.id for run in store.list_runs()}


# --- pages ----------------------------------------------------------------------------------


def test_every_page_reached_by_links_from_the_home_page_answers(server: ViewServer) -> None:
    seen: set[str] = set()
    queue = ["/"]
    while queue and len(seen) < 200:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        status, headers, body = get(server, path)
        assert status == 200, (path, body[:500])
        if path.startswith("/api/"):
            assert headers["content-type"] == "application/json"
            continue
        assert headers["content-type"] == "text/html; charset=utf-8"
        for link in Page(body).links:
            target = urljoin(path, link)
            if not target.startswith("#") and urlsplit(target).netloc == "":
                queue.append(target.split("#", 1)[0] or path)
    assert len(seen) >= 2 + 2 * 1 + 2 * 6  # home, 2 runs, their trial lists and 12 trials
    assert any(quote(ODD_TASK, safe="") in path for path in seen)


def test_the_home_page_lists_the_runs(server: ViewServer, store: Store) -> None:
    status, _, body = get(server, "/")
    assert status == 200
    page = Page(body)
    for name, run_id in run_ids(store).items():
        assert f"/runs/{run_id}" in page.links
        assert name in page.visible
    assert "viewer-demo" in page.visible


def test_a_run_page_has_its_summary_and_tasks_with_trials_linked(
    server: ViewServer, store: Store
) -> None:
    run_id = run_ids(store)["before"]
    status, _, body = get(server, f"/runs/{run_id}")
    assert status == 200
    assert '<section id="summary">' in body and '<section id="tasks">' in body
    text = " ".join(Page(body).visible.split())
    assert "pass@1" in text and "pass^2" in text and "Pass rate (mean over tasks)" in text
    page = Page(body)
    assert f"/runs/{run_id}/trials/spain/0" in page.links
    assert f"/runs/{run_id}/trials/crash/1" in page.links
    assert "/" in page.links and f"/runs/{run_id}/trials" in page.links
    classes = " ".join(attrs.get("class") or "" for _, attrs in page.tags)
    assert "verdict-fail" in classes and "verdict-error" in classes  # never confused
    # a run can be named as on the command line: by name or an unambiguous id prefix
    assert get(server, "/runs/before")[2] == body
    assert get(server, f"/runs/{run_id[:-2]}")[0] == 200


def test_a_trial_page_shows_the_transcript_escaped(server: ViewServer, store: Store) -> None:
    run_id = run_ids(store)["before"]
    status, _, body = get(server, f"/runs/{run_id}/trials/{quote(ODD_TASK, safe='')}/1")
    assert status == 200
    page = Page(body)
    assert "Capital of France?" in page.visible
    assert f"Paris {XSS}" in page.visible  # shown as text...
    assert XSS not in body  # ...never as markup
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert scripts == [{"src": "/static/theme.js"}]
    assert ODD_TASK in page.visible
    links = page.links
    assert f"/runs/{run_id}/trials/{quote(ODD_TASK, safe='')}/0" in links  # the other trial

    status, _, body = get(server, f"/runs/{run_id}/trials/crash/0")
    assert "RuntimeError" in Page(body).visible and XSS not in body


def test_the_trial_list_filters_by_verdict_and_task(server: ViewServer, store: Store) -> None:
    run_id = run_ids(store)["before"]
    _, _, body = get(server, f"/runs/{run_id}/trials?verdict=error")
    links = [link for link in Page(body).links if "/trials/" in link]
    assert links == [f"/runs/{run_id}/trials/crash/0", f"/runs/{run_id}/trials/crash/1"]
    assert "2 trials match" in Page(body).visible

    _, _, body = get(server, f"/runs/{run_id}/trials?task={quote(ODD_TASK)}")
    links = [link for link in Page(body).links if "/trials/" in link]
    assert len(links) == 2 and all(quote(ODD_TASK, safe="") in link for link in links)

    status, _, body = get(server, f"/runs/{run_id}/trials?verdict=maybe")
    assert status == 400 and "maybe" in Page(body).visible


class Forms(HTMLParser):
    """Each form's action and its inputs' names and values."""

    def __init__(self, body: str) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[tuple[str, dict[str, str]]] = []
        self.feed(body)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append((found.get("action") or "", {}))
        elif tag in ("input", "select") and self.forms and found.get("name"):
            self.forms[-1][1][found["name"] or ""] = found.get("value") or ""


def submit(server: ViewServer, path: str, action: str, **values: str) -> tuple[int, str]:
    """Fill in and send the form of the page at `path` whose action is `action`."""
    (fields,) = [f for a, f in Forms(get(server, path)[2]).forms if a == action]
    assert set(values) <= set(fields), (values, fields)
    status, _, body = get(server, f"{action}?{urlencode({**fields, **values})}")
    return status, body


def test_the_forms_lead_to_the_diff_and_compare_pages(server: ViewServer, store: Store) -> None:
    ids = run_ids(store)
    status, body = submit(server, "/compare", "/compare", a="before", b=ids["after"][:-1])
    assert status == 200 and re.search(r"Fixed in B\s+1: spain", Page(body).visible)

    trial = f"/runs/{ids['before']}/trials/spain/1"
    status, body = submit(server, trial, "/diff", b="after")
    assert status == 200
    assert "Berlin" in Page(body).visible and "Madrid" in Page(body).visible

    status, body = submit(
        server, f"/runs/{ids['before']}/trials", f"/runs/{ids['before']}/trials", verdict="fail"
    )
    assert status == 200 and "2 trials match" in Page(body).visible


def test_diff_and_compare_pages(server: ViewServer, store: Store) -> None:
    ids = run_ids(store)
    status, _, body = get(server, f"/diff?task=spain&a={ids['before']}&b={ids['after']}")
    assert status == 200
    text = Page(body).visible
    assert "Berlin" in text and "Madrid" in text

    status, _, body = get(server, "/compare?a=before&b=after")
    assert status == 200
    text = Page(body).visible
    assert re.search(r"Fixed in B\s+1: spain", text), text[-2000:]

    assert get(server, "/diff?task=spain&a=before")[0] == 400
    assert get(server, "/compare?a=before")[0] == 400


@pytest.mark.parametrize("missing", [("scipy", "scipy.stats"), ("numpy", "scipy", "scipy.stats")])
def test_the_compare_page_needs_no_extra(
    server: ViewServer, monkeypatch: pytest.MonkeyPatch, missing: tuple[str, ...]
) -> None:
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)  # `import` fails as if not installed

    status, _, body = get(server, "/compare?a=before&b=after")

    assert status == 200, body[-500:]
    text = " ".join(Page(body).visible.split())  # the terminal rendering wraps long lines
    assert "Exact McNemar test (task verdicts) p = 1 " in text, text[-2000:]
    assert "These tasks: exact stratified test (the gate)" in text
    assert "pip install" not in text  # the statistics are pure Python


# --- the JSON API ---------------------------------------------------------------------------


def test_the_api_serves_runs_reports_and_trials(server: ViewServer, store: Store) -> None:
    status, headers, body = get(server, "/api/runs")
    assert status == 200 and headers["content-type"] == "application/json"
    listed = json.loads(body)
    assert {run["name"] for run in listed} == {"before", "after"}

    run_id = run_ids(store)["before"]
    _, _, body = get(server, f"/api/runs/{run_id}")
    assert json.loads(body) == json.loads(store.load_report(run_id).to_json())

    _, _, body = get(server, f"/api/runs/before/trials/{quote(ODD_TASK, safe='')}/0")
    trial = json.loads(body)
    assert trial["task_id"] == ODD_TASK and trial["outcome"]["output"] == f"Paris {XSS}"

    status, _, body = get(server, "/api/runs/no-such-run")
    assert status == 404 and "no-such-run" in json.loads(body)["error"]


# --- what it refuses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/nothing-here", 404),
        ("/runs/no-such-run", 404),
        ("/runs/before/trials/spain/7", 404),
        ("/runs/before/trials/no-such-task/0", 404),
        ("/runs/before/trials/spain/x", 400),
        ("/runs/before/trials/spain/2147483647", 404),  # the largest a store can hold
        ("/runs/before/trials/spain/2147483648", 400),
        ("/runs/before/trials/spain/" + "9" * 30, 400),
        ("/api/runs/before/trials/spain/" + "9" * 30, 400),
        ("/diff?task=spain&a=before&b=after&trial=" + "9" * 5000, 400),  # beyond int()'s digits
        ("/runs/2", 400),  # both run ids start with the year: ambiguous
        ("/api/nothing", 404),
    ],
)
def test_bad_addresses_get_a_clear_status(server: ViewServer, path: str, status: int) -> None:
    got, headers, body = get(server, path)
    assert got == status, body[:300]
    if path.startswith("/api/"):
        assert json.loads(body)["status"] == status and json.loads(body)["error"]
    else:
        assert headers["content-type"] == "text/html; charset=utf-8"
        assert f"trialkit · {status}" in Page(body).visible


def test_it_only_reads(server: ViewServer) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"):
        status, headers, _ = get(server, "/", method=method)
        assert status == 405 and headers["allow"] == "GET, HEAD"
        assert headers["content-security-policy"] == CSP, method
        assert headers["x-frame-options"] == "DENY", method
    status, headers, _ = get(server, "/", method="BREW")  # a method HTTP does not define
    assert status == 405 and headers["content-security-policy"] == CSP
    status, headers, body = get(server, "/", method="HEAD")
    assert status == 200 and body == "" and int(headers["content-length"]) > 0


def test_connections_send_at_once_without_waiting_for_an_ack(server: ViewServer) -> None:
    """Nagle's algorithm off on each accepted connection: a response written in two parts
    (headers, then body) would otherwise wait out the client's delayed ACK, 40 ms a page."""
    with socket.create_connection((server.host, server.port), timeout=10) as client:
        client.sendall(f"GET / HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n\r\n".encode())
        assert client.recv(12).startswith(b"HTTP/1.1 200")
        accepted = [
            connection.transport.get_extra_info("socket")
            for connection in server.uvicorn.server_state.connections
        ]
        assert accepted, "the server holds the connection open"
        for sock in accepted:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_other_host_names_are_refused(server: ViewServer) -> None:
    """DNS rebinding: a page of another site that resolves its name to 127.0.0.1 must not
    read the store."""
    assert get(server, "/", host=f"evil.example:{server.port}")[0] == 403
    assert get(server, "/api/runs", host="evil.example")[0] == 403
    assert get(server, "/", host=f"localhost:{server.port}")[0] == 200
    assert get(server, "/", host=f"127.0.0.1:{server.port}")[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/runs/before",
        "/runs/before/trials",
        "/runs/before/trials/crash/0",
        "/trends",
        "/trends/viewer-demo",
        "/matrix?suite=viewer-demo",
        "/search?q=paris",
    ],
)
def test_pages_forbid_inline_scripts_and_outside_content(server: ViewServer, path: str) -> None:
    _, headers, body = get(server, path)
    assert headers["content-security-policy"] == (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY" and headers["cache-control"] == "no-store"
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", body, re.S)
    assert scripts and set(scripts) == {""}  # files only: theme.js, and live.js on run pages
    assert "<style" not in body
    for tag, attrs in Page(body).tags:
        assert "style" not in attrs and not any(name.startswith("on") for name in attrs), tag
        for name in ("src", "href", "action"):
            assert not re.match(r"(https?:)?//", attrs.get(name) or ""), (tag, attrs)
        if tag == "script":
            assert attrs["src"] in {"/static/theme.js", "/static/live.js"}


def test_static_files_carry_the_security_headers(server: ViewServer) -> None:
    for path, kind in [("/static/view.css", "text/css"), ("/static/theme.js", "javascript")]:
        status, headers, body = get(server, path)
        assert status == 200 and kind in headers["content-type"] and body
        assert headers["content-security-policy"] == CSP
    assert get(server, "/static/nothing.css")[0] == 404
    assert get(server, "/static/../server.py")[0] == 404


# --- the command ----------------------------------------------------------------------------


def test_the_command_serves_until_interrupted(store: Store, db_url: str) -> None:
    env = {**os.environ, "TRIALKIT_STORE": db_url}
    with subprocess.Popen(
        [sys.executable, "-m", "trialkit.cli", "view", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
            address = urlsplit(url)
            conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
            conn.request("GET", "/api/runs")
            assert len(json.loads(conn.getresponse().read())) == 2
            conn.close()
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def test_a_port_in_use_is_a_clear_error(store: Store, db_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "trialkit.cli", "view", "--port", str(port)],
            capture_output=True,
            text=True,
            env={**os.environ, "TRIALKIT_STORE": db_url},
            timeout=60,
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port 0" in result.stderr
    assert time.monotonic() - started < 60
    assert len(store.list_runs()) == 2  # nothing was touched


def view(db_url: str, *args: str) -> tuple[int, str]:
    """`trialkit view ARGS` in this process (for the errors before it serves)."""
    result = CliRunner().invoke(cli, ["view", *args, "--store", db_url])
    return result.exit_code, result.stderr


def test_a_host_not_of_this_machine_names_the_host_option(store: Store, db_url: str) -> None:
    code, err = view(db_url, "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1: nobody's

    assert code == 2
    assert err == (
        "error: cannot listen on 192.0.2.1:0: Cannot assign requested address; --host "
        "'192.0.2.1' is not an address of this machine: use 127.0.0.1 (the default), ::1, or "
        "an address of one of its network interfaces (0.0.0.0: all)\n"
    )
    assert "--port" not in err


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        (
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            "--host 'nowhere' is not an address of this machine: use 127.0.0.1 (the default)",
        ),
        (
            OSError(errno.EADDRINUSE, "Address already in use"),
            "another program uses port 80: choose another --port, or --port 0",
        ),
        (
            PermissionError(errno.EACCES, "Permission denied"),
            "ports below 1024 need privileges: use --port 8765, or --port 0",
        ),
        (OSError(errno.ENOBUFS, "No buffer space available"), "check --host and --port"),
    ],
)
def test_each_listen_error_names_its_option_and_a_fix(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch, error: OSError, advice: str
) -> None:
    """A name that does not resolve is faked: resolving it for real would ask the network."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("trialkit.view.ViewServer", refuse)

    code, err = view(db_url, "--host", "nowhere", "--port", "80")

    assert code == 2
    assert err.startswith(f"error: cannot listen on nowhere:80: {error.strerror}; {advice}")
    assert err.count("\n") == 1


def test_it_listens_on_an_ipv6_address(store: Store) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with ViewServer(store, host="::1") as server:
        assert server.url == f"http://[::1]:{server.port}/"
        conn = http.client.HTTPConnection("::1", server.port, timeout=30)
        conn.request("GET", "/api/runs")
        assert conn.getresponse().status == 200
        conn.close()


def test_pages_of_a_run_still_going_reload_themselves(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from trialkit.report import RunInfo, SuiteInfo, TaskPlan
    from trialkit.task import SuiteKind

    with Store(sqlite_url(tmp_path / "going.db")) as store:
        run_sync(suite(), store=store, name="done")
        going = RunInfo(id="20261130T000000-abcdef", started_at=datetime.now(UTC), status="running")
        kind = SuiteKind.CAPABILITY
        store.create_run(
            going, SuiteInfo(id="viewer-demo", kind=kind), [TaskPlan(id="a", kind=kind)]
        )
        done = run_ids(store)["done"]
        with ViewServer(store) as server:
            refresh = '<meta http-equiv="refresh" content="5">'
            assert refresh in get(server, "/")[2]  # a run is going
            assert refresh in get(server, f"/runs/{going.id}")[2]
            assert refresh not in get(server, f"/runs/{done}")[2]  # a finished run stays put
    assert refresh not in store_report_html(tmp_path)


def store_report_html(tmp_path: Path) -> str:
    """The file report of a finished run: never reloads."""
    with Store(sqlite_url(tmp_path / "going.db")) as store:
        return store.load_report(run_ids(store)["done"]).to_html()
