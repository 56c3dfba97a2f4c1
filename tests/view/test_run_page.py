"""A run's page at scale: its task table in pages, and its report kept between requests
until the run changes (a label given, trials retried)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from starlette.testclient import TestClient

from trialkit import Suite, Task, graders, run_sync
from trialkit.labels import Label
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app
from trialkit.view.routes.runs import TASKS_PER_PAGE

TASKS = TASKS_PER_PAGE + 30


@pytest.fixture
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with Store(sqlite_url(tmp_path_factory.mktemp("run-page") / "view.db")) as opened:
        suite = Suite(
            id="many",
            kind="regression",
            trials=1,
            harness=lambda prompt: "yes" if prompt != "t0000" else "no",
            tasks=[
                Task(id=f"t{i:04d}", input=f"t{i:04d}", graders=[graders.contains("yes")])
                for i in range(TASKS)
            ],
        )
        run_sync(suite, store=opened, name="many")
        yield opened


def tasks_listed(page: str) -> list[str]:
    return re.findall(r'<span class="task-id">(t\d{4})</span>', page)


def test_the_task_table_comes_in_pages_under_the_whole_runs_summary(store: Store) -> None:
    with TestClient(create_app(store, allowed_hosts={"testserver"})) as client:
        first = client.get("/runs/many")
        assert first.status_code == 200
        assert tasks_listed(first.text) == [f"t{i:04d}" for i in range(TASKS_PER_PAGE)]
        assert f"Showing 1–{TASKS_PER_PAGE} of {TASKS}" in first.text
        assert f"{TASKS - 1}/{TASKS} passed" in first.text or f"Tasks</th><td>{TASKS}" in first.text
        second = client.get("/runs/many?page=2")
        assert tasks_listed(second.text) == [f"t{i:04d}" for i in range(TASKS_PER_PAGE, TASKS)]
        assert client.get("/runs/many?page=0").status_code == 400


def test_a_label_shows_at_once_though_the_report_is_kept(store: Store) -> None:
    run_id = store.resolve_run("many")
    with TestClient(create_app(store, allowed_hosts={"testserver"})) as client:
        before = client.get("/runs/many").text
        row = re.search(
            r'<tr class="verdict-(\w+)">\s*<td class="content"><a [^>]*>'
            r'<span class="task-id">t0000</span>',
            before,
        )
        assert row is not None and row.group(1) == "fail"
        store.save_label(
            Label(
                run_id=run_id,
                task_id="t0000",
                trial=0,
                grader="contains('yes')",
                verdict="pass",
                reviewer="ana",
                labeled_at=datetime.now(UTC),
            )
        )
        after = client.get("/runs/many").text
        row = re.search(
            r'<tr class="verdict-(\w+)">\s*<td class="content"><a [^>]*>'
            r'<span class="task-id">t0000</span>',
            after,
        )
        assert row is not None and row.group(1) == "pass"


def test_a_suites_trend_is_kept_until_one_of_its_runs_changes(store: Store) -> None:
    run_id = store.resolve_run("many")
    with TestClient(create_app(store, allowed_hosts={"testserver"})) as client:
        assert client.get("/trends/many").text.count(f"/runs/{run_id}") >= 1
        again = Suite(
            id="many",
            kind="regression",
            trials=1,
            harness=lambda prompt: "yes",
            tasks=[Task(id="t0000", input="t0000", graders=[graders.contains("yes")])],
        )
        second = run_sync(again, store=store, name="again").run.id
        assert f"/runs/{second}" in client.get("/trends/many").text  # a new run is seen at once
        page = client.get("/trends/many").text
        assert f"/runs/{run_id}" in page and f"/runs/{second}" in page
