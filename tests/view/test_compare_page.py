"""The viewer's compare page concludes as `trialkit compare` does: a task left out of the test
(unknown in A, failing in B) is named with the reason, never summed up as "the same tasks"."""

from __future__ import annotations

import html
import re
from pathlib import Path

from starlette.testclient import TestClient

from tests.analysis._store_runs import write_run
from tests.analysis.test_gate_cli import LANTERN_A, LANTERN_B, REGRESSION_A, REGRESSION_B
from trialkit.analysis.compare import compare_runs
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app


def page(tmp_path: Path, before: dict[str, str], after: dict[str, str]) -> tuple[str, str]:
    """The compare page of two runs, and the conclusion `compare_runs` gives them."""
    with Store(sqlite_url(tmp_path / "view.db")) as store:
        write_run(store, "run-a", before)
        write_run(store, "run-b", after, hours=1)
        expected = compare_runs(store, ["run-a", "run-b"]).pairs[0].conclusion
        with TestClient(create_app(store, allowed_hosts={"testserver"})) as client:
            response = client.get("/compare?a=run-a&b=run-b")
    assert response.status_code == 200, response.text[-500:]
    return response.text, expected


def conclusion_of(body: str) -> str:
    found = re.search(r'<p class="conclusion"><strong>(.*?)</strong></p>', body, re.S)
    assert found is not None, body[-2000:]
    return html.unescape(found.group(1))


def test_a_task_unknown_in_a_and_failing_in_b_is_named_in_the_headline(tmp_path: Path) -> None:
    body, expected = page(tmp_path, LANTERN_A, LANTERN_B)

    headline = conclusion_of(body)
    assert headline == expected
    assert "Not compared: lantern-refund (unknown (3 trials unknown) in A, fail 0/3 in B)." in (
        headline
    )
    assert "same tasks" not in html.unescape(body)
    assert 'class="suite-conclusion">For tasks like these:' in body


def test_a_regression_is_headlined_as_the_gate_decides(tmp_path: Path) -> None:
    body, expected = page(tmp_path, REGRESSION_A, REGRESSION_B)

    headline = conclusion_of(body)
    assert headline == expected
    assert headline.startswith("B is worse than A on these tasks")
    assert '<section class="pair outcome-worse">' in body
