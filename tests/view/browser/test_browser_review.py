"""Review and live progress in a real browser: a reviewer goes from the queue to a trial,
labels it and lands on the next one, and the label is the one `trialkit labels export` and
`trialkit calibrate` read; a running run's page counts its trials as they finish, without a
reload, as does its trials list, and says when it has ended. No console error, no CSP violation."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from tests.view.browser.conftest import WATCH_CSP, Watched
from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view import ViewServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext

WAIT_MS = 20_000
"""The longest a step waits for the page (the run and the viewer are both local)."""

OpenOn = Callable[[ViewServer], Watched]


@pytest.fixture
def open_on(browser: Browser) -> Iterator[OpenOn]:
    """`open_on(server)`: a new watched page on that viewer."""
    contexts: list[BrowserContext] = []

    def make(server: ViewServer) -> Watched:
        context = browser.new_context()
        context.add_init_script(WATCH_CSP)
        contexts.append(context)
        return Watched(context, server.url)

    yield make
    for context in contexts:
        context.close()


def review_suite() -> Suite:
    return Suite(
        id="support",
        kind="capability",
        trials=2,
        harness=lambda prompt: "Paris",
        tasks=[
            Task(
                id="capital",
                input="Capital of France?",
                graders=[graders.contains("paris"), graders.human(instructions="Right?")],
            ),
        ],
    )


def test_a_reviewer_labels_a_trial_and_lands_on_the_next(
    open_on: OpenOn, tmp_path: Path, screenshots: Path
) -> None:
    url = sqlite_url(tmp_path / "review.db")
    with Store(url) as store, ViewServer(store) as server:
        run = run_sync(review_suite(), store=store, name="support").run.id
        watched = open_on(server)
        assert watched.goto(f"/runs/{run}/review") == 200
        assert "2 reviews to do" in watched.page.locator("#pending").inner_text()
        watched.page.screenshot(path=str(screenshots / "review-queue.png"), full_page=True)

        watched.page.click("a.start-review")
        watched.page.wait_for_url(f"**/runs/{run}/trials/capital/0#review", timeout=WAIT_MS)
        form = watched.page.locator("form.label-form")
        form.locator("input[name=verdict][value=pass]").check()
        form.locator("textarea[name=comment]").fill("right, and said kindly")
        form.locator("input[name=reviewer]").fill("ana")
        watched.page.screenshot(path=str(screenshots / "review-form.png"), full_page=True)
        form.locator("button[type=submit]").click()

        watched.page.wait_for_url(
            lambda at: f"/runs/{run}/trials/capital/1?" in at, timeout=WAIT_MS
        )
        notice = watched.page.locator(".notice").inner_text()
        assert "Saved: capital #0 labelled pass for human by ana." in notice
        assert watched.page.locator("input[name=reviewer]").input_value() == "ana"
        assert watched.errors == [], watched.errors

        exported = tmp_path / "labels.jsonl"
        runner = CliRunner()
        done = runner.invoke(cli, ["labels", "export", run, "-o", str(exported), "--store", url])
        assert done.exit_code == 0, done.output
        assert '"comment":"right, and said kindly"' in exported.read_text()
        calibrated = runner.invoke(
            cli,
            [
                "calibrate",
                "--labels",
                str(exported),
                "--grader",
                "contains('paris')",
                "--store",
                url,
            ],
        )
        assert calibrated.exit_code == 0 and "1 compared" in calibrated.output, calibrated.output


def test_a_running_runs_page_counts_trials_as_they_finish(
    open_on: OpenOn, tmp_path: Path, screenshots: Path
) -> None:
    gate = threading.Semaphore(0)

    def agent(prompt: str) -> str:
        assert gate.acquire(timeout=WAIT_MS / 1000), "the test never let the trial finish"
        return "yes" if "one" in prompt else "no"

    suite = Suite(
        id="slow",
        kind="capability",
        trials=2,
        harness=agent,
        tasks=[
            Task(id="one", input="one", graders=[graders.contains("yes")]),
            Task(id="two", input="two", graders=[graders.contains("yes")]),
        ],
    )
    url = sqlite_url(tmp_path / "live.db")
    with Store(url) as viewed, ViewServer(viewed) as server, Store(url) as written:
        worker = threading.Thread(
            target=run_sync, args=(suite,), kwargs={"store": written, "concurrency": 1}
        )
        worker.start()
        try:
            run = wait_for_run(viewed)
            watched = open_on(server)
            assert watched.goto(f"/runs/{run}") == 200
            page = watched.page
            page.evaluate("() => { window.notReloaded = true; }")
            listing = open_on(server)
            assert listing.goto(f"/runs/{run}/trials") == 200
            assert page.locator("#progress .live-status").inner_text() == "running"
            assert page.locator("#progress .live-planned").inner_text() == "4"

            gate.release()
            page.wait_for_function(
                "() => document.querySelector('#progress .live-done').textContent === '1'",
                timeout=WAIT_MS,
            )
            assert page.locator("#progress .live-passed").inner_text() == "1"
            assert page.locator(".live-trials li").count() == 1
            listing.page.wait_for_function(
                "() => document.querySelector('#progress .live-done').textContent === '1'",
                timeout=WAIT_MS,
            )
            assert "one #0" in listing.page.locator(".live-trials").inner_text()
            assert "one #0" in page.locator(".live-trials").inner_text()

            gate.release(3)
            page.wait_for_function(
                "() => document.querySelector('#progress').dataset.status === 'completed'",
                timeout=WAIT_MS,
            )
            box = page.locator("#progress")
            assert box.locator(".live-done").inner_text() == "4"
            assert box.locator(".live-failed").inner_text() == "2"
            assert box.locator(".live-status").inner_text() == "completed"
            assert "reload for the whole report" in box.inner_text()
            assert page.evaluate("() => window.notReloaded") is True
            page.screenshot(path=str(screenshots / "live-finished.png"), full_page=True)
            listing.page.wait_for_function(
                "() => document.querySelector('#progress').dataset.status === 'completed'",
                timeout=WAIT_MS,
            )
            assert listing.page.locator("#progress .live-done").inner_text() == "4"
            assert watched.errors == [] and listing.errors == [], watched.errors + listing.errors
        finally:
            gate.release(4)
            worker.join(timeout=WAIT_MS / 1000)
        assert not worker.is_alive()


def wait_for_run(store: Store) -> str:
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        listed = store.list_runs(limit=1)
        if listed:
            return listed[0].id
        time.sleep(0.02)
    raise AssertionError("the run never started")
