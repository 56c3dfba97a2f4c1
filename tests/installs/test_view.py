"""`pip install 'trialkit[view]'` alone, as the guide says: `trialkit view` serves the store,
a review form saves a label over HTTP with the page's CSRF token, a POST without it or to a
`--read-only` viewer is a 403, a label for a task the run lacks a 400 naming the field, and
an agent's terminal escapes never reach a page."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from tests.installs.helpers import said, trialkit

INSTALL = "view"

SUITE = """
from trialkit import Suite, Task, graders

suite = Suite(
    id="colours",
    trials=1,
    harness=lambda prompt: "Paris, said in \\x1b[31mred\\x1b[0m",
    tasks=[Task(id="france", input="Capital of France?", graders=[graders.contains("paris")])],
)
"""


class Viewer:
    """`trialkit view --port 0` as a process, with an HTTP client that keeps its cookie."""

    def __init__(self, folder: Path, *options: str) -> None:
        command = Path(sys.executable).with_name("trialkit")
        self.process = subprocess.Popen(
            [str(command), "view", "--port", "0", *options],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("http://"):
            self.process.kill()
            _, err = self.process.communicate(timeout=30)
            raise AssertionError(f"trialkit view did not start: {line!r} {err}")
        where = urlsplit(line)
        self.host, self.port = where.hostname or "", where.port or 0
        self.cookie = ""

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        headers = {"Cookie": self.cookie} if self.cookie else {}
        body = None
        if form is not None:
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=body, headers=headers)
            answer = conn.getresponse()
            text = answer.read().decode("utf-8")
            found = {k.lower(): v for k, v in answer.getheaders()}
        finally:
            conn.close()
        if "set-cookie" in found:
            self.cookie = found["set-cookie"].split(";", 1)[0]
        return answer.status, found, text

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; its exit code."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
        return self.process.returncode


@pytest.fixture
def run(tmp_path: Path) -> str:
    (tmp_path / "colours.py").write_text(SUITE, encoding="utf-8")
    done = trialkit("run", "colours.py", "--json", "report.json", cwd=tmp_path)
    assert done.returncode == 0, said(done)
    return str(json.loads((tmp_path / "report.json").read_text())["run"]["id"])


def token_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
    assert found, page[-2000:]
    return found.group(1)


def reason(page: str) -> str:
    found = re.search(r'<p class="reason">(.*?)</p>', page, re.S)
    return found.group(1) if found else page[-1000:]


def label(token: str | None, **fields: str) -> dict[str, str]:
    values = {"task": "france", "trial": "0", "grader": "contains('paris')", "verdict": "fail"}
    values |= {"comment": "not what I asked", **fields}
    return values if token is None else {"csrf_token": token, **values}


def test_a_label_is_saved_over_http_with_the_pages_csrf_token(tmp_path: Path, run: str) -> None:
    viewer = Viewer(tmp_path)
    try:
        status, _, page = viewer.request("GET", f"/runs/{run}/trials/france/0")
        assert status == 200, page[-1000:]
        assert "\x1b" not in page and "said in red" in page
        token = token_of(page)

        status, _, page = viewer.request("POST", f"/runs/{run}/review", label(None))
        assert status == 403, reason(page)
        assert "CSRF" in reason(page)

        status, _, page = viewer.request("POST", f"/runs/{run}/review", label(token, task="x"))
        assert status == 400 and reason(page).startswith("task: "), reason(page)

        status, headers, page = viewer.request("POST", f"/runs/{run}/review", label(token))
        assert status == 303, reason(page)
        assert headers["location"].startswith(f"/runs/{run}/")
    finally:
        assert viewer.stop() in (0, 130)

    done = trialkit("labels", "export", run, "-o", "labels.jsonl", cwd=tmp_path)
    assert done.returncode == 0, said(done)
    (saved,) = [json.loads(line) for line in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert (saved["task_id"], saved["trial"], saved["verdict"]) == ("france", 0, "fail")
    assert saved["comment"] == "not what I asked"


def test_a_read_only_viewer_refuses_a_write(tmp_path: Path, run: str) -> None:
    viewer = Viewer(tmp_path, "--read-only")
    try:
        status, _, page = viewer.request("GET", f"/runs/{run}/trials/france/0")
        assert status == 200 and "csrf_token" not in page
        status, _, page = viewer.request("POST", f"/runs/{run}/review", label("0" * 64))
        assert status == 403 and "takes no labels" in reason(page), reason(page)
    finally:
        assert viewer.stop() in (0, 130)
    done = trialkit("labels", "export", run, "-o", "labels.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "labels.jsonl").read_text() == "", said(done)
