"""A trial's page shows its task's expected answer and success criteria (stored with the run's
plan, m009_task_reference), as text, and nothing of them when the task has none."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from trialkit import Suite, Task, graders, run_sync
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> & Paris'
CRITERIA = "Names <b>Paris</b>; 100% sure & brief."


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    folder: Path = tmp_path_factory.mktemp("reference")
    with Store(sqlite_url(folder / "view.db")) as store:
        suite = Suite(
            id="expected",
            kind="regression",
            trials=1,
            harness=lambda prompt: "Paris",
            tasks=[
                Task(
                    id="france",
                    input="Capital of France?",
                    reference=HOSTILE,
                    criteria=CRITERIA,
                    graders=[graders.contains("Paris")],
                ),
                Task(id="bare", input="Capital of Spain?", graders=[graders.contains("x")]),
            ],
        )
        run_sync(suite, store=store, name="expected")
        with TestClient(create_app(store, allowed_hosts={"testserver"})) as opened:
            yield opened


def test_the_trial_page_shows_the_expected_answer_and_criteria_as_text(
    client: TestClient,
) -> None:
    response = client.get("/runs/expected/trials/france/0")
    assert response.status_code == 200
    body = response.text
    assert "Expected answer" in body and "Success criteria" in body
    reference = re.search(r'<pre class="text reference">(.*?)</pre>', body, re.S)
    criteria = re.search(r'<pre class="text criteria">(.*?)</pre>', body, re.S)
    assert reference is not None and criteria is not None
    assert html.unescape(reference[1]) == HOSTILE  # shown as text...
    assert "<" not in reference[1] and '"' not in reference[1]  # ...never as markup
    assert html.unescape(criteria[1]) == CRITERIA and "<" not in criteria[1]
    assert body.index("Expected answer") < body.index("Transcript")


def test_a_task_without_them_shows_neither(client: TestClient) -> None:
    body = client.get("/runs/expected/trials/bare/0").text
    assert "Expected answer" not in body and "Success criteria" not in body
