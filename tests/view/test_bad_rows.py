"""A trial row changed behind trialkit's back does not take its run's pages down: the run page
and its trials list answer 200 with the rest of the run, and the trials list shows the bad
trial as an error naming the column and what is wrong (its own page says why it cannot be
shown)."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool
from starlette.testclient import TestClient

from tests.store._samples import make_sample
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.view.app import create_app

RUN = "run-bad-row"

CORRUPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "verdict": ("verdict", {"verdict": "maybe"}),
    "status": ("status", {"status": "exploded"}),
    "started_at": ("started_at", {"started_at": "yesterday"}),
    "error": ("error", {"error": "{"}),
    "duration": ("duration_s", {"duration_s": "slow"}),
    "cost": ("cost_usd", {"cost_usd": "a lot"}),
    "ended_at": (None, {"ended_at": "later"}),
    "scores": (None, {"scores": "[{not json"}),
}
"""Kind: (the column the trials list names, or None when it does not read it; the values)."""


def _stored(tmp_path: Path, *, finished: bool) -> str:
    url = sqlite_url(tmp_path / "view.db")
    sample = make_sample(RUN)
    with Store(url) as store:
        store.create_run(sample.run, sample.suite, sample.plans)
        store.save_trials(sample.trials)
        if finished:
            sample.run.status = "completed"
            sample.run.finished_at = sample.run.started_at
            store.finish_run(sample.run)
    return url


def _corrupt(url: str, values: dict[str, Any]) -> None:
    assignments = ", ".join(f"{column} = :{column}" for column in values)
    statement = text(
        f"UPDATE trials SET {assignments} WHERE run_id = :run AND task_id = 'france' AND idx = 0"
    )
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        assert conn.execute(statement, {**values, "run": RUN}).rowcount == 1
    engine.dispose()


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


@pytest.mark.parametrize("finished", [False, True], ids=["running", "finished"])
@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_the_run_page_and_its_trials_list_show_the_rest(
    tmp_path: Path, kind: str, finished: bool
) -> None:
    column, values = CORRUPTIONS[kind]
    url = _stored(tmp_path, finished=finished)
    _corrupt(url, values)
    with Store(url) as store, TestClient(create_app(store, allowed_hosts={"testserver"})) as client:
        run_page = client.get(f"/runs/{RUN}")
        assert run_page.status_code == 200, _text(run_page.text)[:500]
        for task in ("france", "json", "tools", "never-ran"):
            assert f'<span class="task-id">{task}</span>' in run_page.text
        listing = client.get(f"/runs/{RUN}/trials")
        assert listing.status_code == 200, _text(listing.text)[:500]
        shown = _text(listing.text)
        for trial in ("france #1", "json #0", "json #1", "tools #0"):
            assert trial in shown
        bad = re.search(
            r'<tr class="verdict-(\w+)">\s*<td class="content"><a [^>]*>'
            r'<span class="task-id">france</span> <span class="nowrap">#0</span>(.*?)</tr>',
            listing.text,
            re.DOTALL,
        )
        assert bad is not None
        if column is not None:
            assert bad.group(1) == "error"
            assert f"stored row could not be read: {column}: " in _text(bad.group(2))
        errored = client.get(f"/runs/{RUN}/trials?verdict=error")
        assert errored.status_code == 200
        assert client.get(f"/api/runs/{RUN}").status_code == 200
