"""Review in the browser and live progress, in-process (Starlette's test client): a label
posted from a trial's page is the label `trialkit review` would store (the store, `trialkit
labels export` and `trialkit calibrate` see it); the CSRF token, the Host check, bad fields,
GETs that cannot write and read-only viewers; `/api/runs/RUN/progress` counts and pages."""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.report import Report
from trialkit.store import Store, StoreError
from trialkit.store.progress import TRIALS_PER_POLL
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app
from trialkit.view.routes.review import REVIEWER_COOKIE
from trialkit.view.security import SESSION_COOKIE

SECRET = "sk-test-0123456789abcdefSECRET"
HOST = "testserver"


def review_suite(trials: int = 3) -> Suite:
    return Suite(
        id="support",
        kind="capability",
        trials=trials,
        harness=lambda prompt: "Paris" if "capital" in prompt else "no idea",
        tasks=[
            Task(
                id="capital",
                input="capital of France?",
                graders=[graders.contains("paris"), graders.human(instructions="Is it right?")],
            ),
            Task(id="tone", input="be kind", tags=["review"]),
        ],
    )


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[tuple[Store, str, Report]]:
    url = sqlite_url(tmp_path / "view.db")
    with Store(url) as store:
        yield store, url, run_sync(review_suite(), store=store, name="support")


def client_of(store: Store, **options: Any) -> TestClient:
    options.setdefault("allowed_hosts", {HOST})
    return TestClient(create_app(store, **options))


def token_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
    assert found, "the page has no CSRF token"
    return found.group(1)


def form(token: str, **fields: str) -> dict[str, str]:
    values = {"task": "capital", "trial": "0", "grader": "human", "verdict": "pass"}
    return {"csrf_token": token, **values, **fields}


def reason(page: str) -> str:
    found = re.search(r'<p class="reason">(.*?)</p>', page, re.S)
    assert found, page[-1500:]
    return found.group(1)


def test_a_label_posted_is_stored_as_trialkit_review_stores_it(
    stored: tuple[Store, str, Report], tmp_path: Path
) -> None:
    store, url, report = stored
    run = report.run.id
    client = client_of(store)
    page = client.get(f"/runs/{run}/trials/capital/0")
    assert page.status_code == 200 and 'class="label-form"' in page.text
    assert "(pending)" in page.text
    assert f'class="skip-review" href="/runs/{run}/trials/capital/1#review"' in page.text
    last = client.get(f"/runs/{run}/trials/tone/2").text  # the queue starts again
    assert f'class="skip-review" href="/runs/{run}/trials/capital/0#review"' in last

    sent = client.post(
        f"/runs/{run}/review",
        data=form(token_of(page.text), comment="right, and kind", reviewer="ana", score="0.9"),
        follow_redirects=False,
    )
    assert sent.status_code == 303
    where = sent.headers["location"]
    assert where.startswith(f"/runs/{run}/trials/capital/1?")  # the next pending trial
    assert REVIEWER_COOKIE in sent.headers["set-cookie"]

    landed = client.get(where)
    assert "Saved: capital #0 labelled pass for human by ana." in landed.text
    assert 'name="reviewer" value="ana"' in landed.text  # remembered by the cookie

    [label] = store.labels(run)
    assert (label.task_id, label.trial, label.grader, label.verdict) == (
        "capital",
        0,
        "human",
        "pass",
    )
    assert (label.score, label.reviewer, label.comment) == (0.9, "ana", "right, and kind")
    assert store.pending_reviews(run)[0].task_id == "capital"
    assert store.pending_reviews(run)[0].trial == 1

    exported = tmp_path / "labels.jsonl"
    runner = CliRunner()
    done = runner.invoke(cli, ["labels", "export", run, "-o", str(exported), "--store", url])
    assert done.exit_code == 0, done.output
    assert '"comment":"right, and kind"' in exported.read_text()
    calibrated = runner.invoke(
        cli,
        ["calibrate", "--labels", str(exported), "--grader", "contains('paris')", "--store", url],
    )
    assert calibrated.exit_code == 0, calibrated.output
    assert "1 label" in calibrated.output and "1 compared" in calibrated.output


def test_the_queue_lists_pending_trials_and_the_last_label_goes_back_to_it(
    stored: tuple[Store, str, Report],
) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    queue = client.get(f"/runs/{run}/review")
    assert queue.status_code == 200
    assert "6 reviews to do" in queue.text and "start with the first" in queue.text
    token = token_of(client.get(f"/runs/{run}/trials/tone/2").text)
    for task in ("capital", "tone"):
        for index in range(3):
            sent = client.post(
                f"/runs/{run}/review",
                data=form(token, task=task, trial=str(index), verdict="fail"),
                follow_redirects=False,
            )
            assert sent.status_code == 303, reason(sent.text)
    assert sent.headers["location"].startswith(f"/runs/{run}/review?")
    done = client.get(sent.headers["location"])
    assert "Nothing to review in this run." in done.text
    assert "Saved: tone #2 labelled fail for human" in done.text
    assert store.load_report(run).summary.pending == 0


def test_a_label_may_override_any_graders_verdict(stored: tuple[Store, str, Report]) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)
    sent = client.post(
        f"/runs/{run}/review",
        data=form(token, grader="contains('paris')", verdict="fail", comment="wrong city"),
        follow_redirects=False,
    )
    assert sent.status_code == 303
    trial = store.load_trial(run, "capital", 0)
    assert trial.scores[0].verdict == "fail" and trial.scores[0].metadata["before_label"]
    unknown = client.post(f"/runs/{run}/review", data=form(token, grader="nobody"))
    assert unknown.status_code == 400 and reason(unknown.text).startswith("grader: ")


def test_a_post_without_the_token_or_from_another_host_or_site_is_refused(
    stored: tuple[Store, str, Report],
) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)
    without = {k: v for k, v in form(token).items() if k != "csrf_token"}
    assert client.post(f"/runs/{run}/review", data=without).status_code == 403
    wrong = form("0" * 64)
    assert client.post(f"/runs/{run}/review", data=wrong).status_code == 403
    elsewhere = client.post(f"/runs/{run}/review", data=form(token), headers={"host": "evil.test"})
    assert elsewhere.status_code == 403
    cross = client.post(
        f"/runs/{run}/review", data=form(token), headers={"origin": "http://evil.test"}
    )
    assert cross.status_code == 403
    fetched = client.post(
        f"/runs/{run}/review", data=form(token), headers={"sec-fetch-site": "cross-site"}
    )
    assert fetched.status_code == 403
    assert store.labels(run) == []
    # What a browser sends for the viewer's own form (its Referrer-Policy is no-referrer).
    own = {"origin": "null", "sec-fetch-site": "same-origin"}
    sent = client.post(f"/runs/{run}/review", data=form(token), headers=own)
    assert sent.status_code == 200 and len(store.labels(run)) == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"score": "1.5"}, "score"),
        ({"score": "nan"}, "score"),
        ({"score": "lots"}, "score"),
        ({"verdict": "maybe"}, "verdict"),
        ({"task": ""}, "task"),
        ({"trial": "-1"}, "trial"),
        ({"trial": "9" * 30}, "trial"),
        ({"comment": "x" * 20_001}, "comment"),
        ({"grader": ""}, "grader"),
        ({"task": "no-such-task"}, "task"),
        ({"trial": "7"}, "trial"),
        ({"task": "tone", "trial": "3"}, "trial"),
    ],
)
def test_a_bad_field_is_a_400_naming_it_and_nothing_is_stored(
    stored: tuple[Store, str, Report], fields: dict[str, str], field: str
) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)
    sent = client.post(f"/runs/{run}/review", data=form(token, **fields))
    assert sent.status_code == 400
    assert reason(sent.text).startswith(f"{field}: ")
    assert store.labels(run) == []


def test_a_refused_form_does_not_echo_what_it_was_sent(
    stored: tuple[Store, str, Report],
) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)
    sent = client.post(
        f"/runs/{run}/review",
        data=form(token, score=SECRET, comment=f"key {SECRET}", reviewer=SECRET),
    )
    assert sent.status_code == 400 and SECRET not in sent.text


def test_a_get_cannot_write(stored: tuple[Store, str, Report]) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    page = client.get(f"/runs/{run}/review", params=form("x"))
    assert page.status_code == 200
    assert client.put(f"/runs/{run}/review", data=form("x")).status_code == 405
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)
    assert client.post(f"/runs/{run}/trials/capital/0", data=form(token)).status_code == 405
    assert store.labels(run) == []


@pytest.mark.parametrize(
    "options",
    [{"read_only": True}, {"allowed_hosts": None}],
    ids=["read-only", "beyond-loopback"],
)
def test_a_read_only_viewer_shows_labels_but_no_form_and_refuses_the_post(
    stored: tuple[Store, str, Report], options: dict[str, Any]
) -> None:
    store, _, report = stored
    run = report.run.id
    writer = client_of(store)
    token = token_of(writer.get(f"/runs/{run}/trials/capital/0").text)
    assert writer.post(f"/runs/{run}/review", data=form(token, comment="seen")).status_code == 200

    app = create_app(store, **{"allowed_hosts": {HOST}, **options})
    reader = TestClient(app)
    page = reader.get(f"/runs/{run}/trials/capital/0")
    assert page.status_code == 200
    assert 'class="label-form"' not in page.text and "csrf_token" not in page.text
    assert "This viewer takes no labels" in page.text and "seen" in page.text
    queue = reader.get(f"/runs/{run}/review")
    assert "start with the first" not in queue.text and "seen" in queue.text
    session = reader.cookies[SESSION_COOKIE]  # the reader's own, valid token:
    own = hmac.new(app.state.csrf_secret, session.encode(), hashlib.sha256).hexdigest()
    refused = reader.post(f"/runs/{run}/review", data=form(own, trial="1"))
    assert refused.status_code == 403 and "takes no labels" in reason(refused.text)
    stranger = TestClient(app).post(f"/runs/{run}/review", content=b"\xff", headers=MULTIPART)
    assert stranger.status_code == 403 and "takes no labels" in reason(stranger.text)
    assert [(x.task_id, x.trial) for x in store.labels(run)] == [("capital", 0)]


MULTIPART = {"content-type": "multipart/form-data; boundary=b"}


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("multipart/form-data; boundary=b", b"not multipart at all", 400),
        ("multipart/form-data", b"--b--\r\n", 400),  # no boundary
        ("application/x-www-form-urlencoded", b"task=\xff\xfe&trial=%zz", 403),
        ("text/plain", b"csrf_token=x", 403),
        ("application/json", b"{", 403),
        ("", b"", 403),
    ],
)
def test_a_malformed_post_is_refused_never_a_500(
    stored: tuple[Store, str, Report], content_type: str, body: bytes, status: int
) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    client.get(f"/runs/{run}/trials/capital/0")  # a session
    sent = client.post(f"/runs/{run}/review", content=body, headers={"content-type": content_type})
    assert sent.status_code == status, reason(sent.text)
    assert store.labels(run) == []


def test_a_label_sent_as_multipart_is_read(stored: tuple[Store, str, Report]) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)
    sent = client.post(f"/runs/{run}/review", files={k: (None, v) for k, v in form(token).items()})
    assert sent.status_code == 200
    assert [(x.task_id, x.trial, x.verdict) for x in store.labels(run)] == [("capital", 0, "pass")]


def slowly(prompt: str) -> str:
    time.sleep(0.002)  # trials a little apart, so the order they finished in is clear
    return "yes" if "good" in prompt else "no"


def test_progress_counts_and_pages_the_trials_in_the_order_they_finished(
    tmp_path: Path,
) -> None:
    many = TRIALS_PER_POLL + 5
    suite = Suite(
        id="many",
        kind="capability",
        trials=many,
        harness=slowly,
        tasks=[
            Task(id="good", input="good", graders=[graders.contains("yes")]),
            Task(id="bad", input="bad", graders=[graders.contains("yes")]),
        ],
    )
    with Store(sqlite_url(tmp_path / "many.db")) as store:
        report = run_sync(suite, store=store, concurrency=1)
        client = client_of(store)
        api = f"/api/runs/{report.run.id}/progress"
        first = client.get(api).json()
        assert first["status"] == "completed" and first["planned"] == 2 * many
        assert (first["done"], first["passed"], first["failed"]) == (2 * many, many, many)
        assert (first["errors"], first["unknown"], first["after"]) == (0, 0, 0)
        assert len(first["trials"]) == TRIALS_PER_POLL and first["next"] == TRIALS_PER_POLL
        assert first["trials"][0] == {
            "task": "good",
            "index": 0,
            "verdict": "pass",
            "status": "completed",
            "duration_s": first["trials"][0]["duration_s"],
            "url": f"/runs/{report.run.id}/trials/good/0",
        }
        seen = [(t["task"], t["index"]) for t in first["trials"]]
        after = first["next"]
        while after < first["done"]:
            page = client.get(api, params={"after": after}).json()
            seen += [(t["task"], t["index"]) for t in page["trials"]]
            after = page["next"]
        assert seen == [("good", i) for i in range(many)] + [("bad", i) for i in range(many)]
        assert client.get(api, params={"after": 10_000}).json()["trials"] == []
        bad = client.get(api, params={"after": "-1"})
        assert bad.status_code == 400 and bad.json()["error"].startswith("after ")
        assert client.get("/api/runs/nope/progress").status_code == 404


def test_a_running_runs_pages_carry_the_live_box(tmp_path: Path) -> None:
    gate = threading.Semaphore(0)

    def agent(prompt: str) -> str:
        assert gate.acquire(timeout=30), "the test never let the trial finish"
        return "yes"

    suite = Suite(
        id="slow",
        kind="capability",
        trials=3,
        harness=agent,
        tasks=[Task(id="wait", input="go", graders=[graders.contains("yes")])],
    )
    with Store(sqlite_url(tmp_path / "live.db")) as store:
        worker = threading.Thread(
            target=run_sync, args=(suite,), kwargs={"store": store, "concurrency": 1}
        )
        worker.start()
        try:
            client = client_of(store)
            run = wait_for_run(store)
            gate.release()
            progress = wait_for(client, run, lambda p: p["done"] == 1)
            assert progress["status"] == "running" and progress["planned"] == 3
            for path in (f"/runs/{run}", f"/runs/{run}/trials"):
                page = client.get(path).text
                assert 'id="progress"' in page and 'data-status="running"' in page, path
                assert '<script src="/static/live.js" defer></script>' in page
                assert '<noscript><meta http-equiv="refresh"' in page
        finally:
            gate.release(3)
            worker.join(timeout=30)
        assert not worker.is_alive()
        finished = wait_for(client, run, lambda p: p["status"] == "completed")
        assert finished["done"] == 3 and finished["passed"] == 3
        assert 'id="progress"' not in client.get(f"/runs/{run}").text


def wait_for_run(store: Store) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        listed = store.list_runs(limit=1)
        if listed:
            return listed[0].id
        time.sleep(0.02)
    raise AssertionError("the run never started")


def wait_for(client: TestClient, run: str, done: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        progress: dict[str, Any] = client.get(f"/api/runs/{run}/progress").json()
        if done(progress):
            return progress
        time.sleep(0.02)
    raise AssertionError(f"the run's progress never got there: {progress}")


def test_a_store_that_refuses_the_write_is_a_503_that_says_so(
    stored: tuple[Store, str, Report], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, report = stored
    run = report.run.id
    client = client_of(store)
    token = token_of(client.get(f"/runs/{run}/trials/capital/0").text)

    def refuse(label: object) -> None:
        raise StoreError("cannot save labels: attempt to write a readonly database")

    monkeypatch.setattr(store, "save_label", refuse)
    sent = client.post(f"/runs/{run}/review", data=form(token))
    assert sent.status_code == 503
    assert "the label was not saved" in reason(sent.text) and "readonly" in reason(sent.text)
