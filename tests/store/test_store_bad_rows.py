"""One trial row changed behind trialkit's back (bad JSON in a column, a field of the wrong
type, an unknown verdict, a time that is none) does not hide its run: the run's report and its
trial listing show every other trial as it is, and the bad one as an error whose message names
the column and what is wrong. On SQLite and on PostgreSQL; the store is not changed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from trialkit.cli.main import cli
from trialkit.report import Report
from trialkit.score import Verdict
from trialkit.store import Store, queries
from trialkit.store.rows import STORED_ROW_ERROR
from trialkit.store.schema import trials

from ._samples import make_sample

RUN = "run-bad-row"

PORTABLE: dict[str, tuple[str, dict[str, Any]]] = {
    "verdict": ("verdict", {"verdict": "maybe"}),
    "status": ("status", {"status": "exploded"}),
    "started_at": ("started_at", {"started_at": "yesterday"}),
    "scores_json": ("scores", {"scores": "[{not json"}),
    "scores_shape": ("scores", {"scores": '[{"verdict": 7}]'}),
    "usage_field": ("usage", {"usage": '{"input_tokens": "many"}'}),
    "error_json": ("error", {"error": "{"}),
    "grader_usage": ("grader_usage", {"grader_usage": "null"}),
}
"""Kind: (the column named, the values written). Text columns: any database takes them."""
SQLITE_ONLY: dict[str, tuple[str, dict[str, Any]]] = {
    "duration_text": ("duration_s", {"duration_s": "slow"}),
    "cost_text": ("cost_usd", {"cost_usd": "a lot"}),
    "output_bytes": ("output", {"output": b"\xff\xfe\x00"}),
}
"""Values of a type their column does not have: SQLite keeps any value in any column."""
KINDS = {**PORTABLE, **SQLITE_ONLY}
LISTED_COLUMNS = {"verdict", "status", "started_at", "error", "duration_s", "cost_usd"}
"""The columns a trial listing reads (it reads no JSON but the error)."""


def _store_run(url: str, *, finished: bool) -> Report:
    sample = make_sample(RUN)
    with Store(url) as store:
        store.create_run(sample.run, sample.suite, sample.plans)
        store.save_trials(sample.trials)
        if finished:  # its report is kept: the bad row is found when it is listed
            sample.run.status = "completed"
            sample.run.finished_at = sample.run.started_at
            store.finish_run(sample.run)
        return store.load_report(RUN)


def _corrupt(url: str, values: dict[str, Any]) -> None:
    """Direct SQL, as another tool would write it (no column type converts the values)."""
    assignments = ", ".join(f"{column} = :{column}" for column in values)
    statement = text(
        f"UPDATE trials SET {assignments} WHERE run_id = :run AND task_id = 'france' AND idx = 0"
    )
    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        assert conn.execute(statement, {**values, "run": RUN}).rowcount == 1
    engine.dispose()


def _kinds(db_url: str) -> list[str]:
    return list(KINDS if db_url.startswith("sqlite") else PORTABLE)


def _check_marked(error: Any, column: str) -> None:
    assert error is not None
    assert error.type == STORED_ROW_ERROR
    assert error.message.startswith(f"stored row could not be read: {column}: "), error.message
    assert "\n" not in error.message


@pytest.mark.parametrize("finished", [False, True], ids=["running", "finished"])
def test_the_report_shows_the_rest_and_the_bad_trial_as_an_error(
    db_url: str, finished: bool
) -> None:
    for kind in _kinds(db_url):
        column, values = KINDS[kind]
        url = db_url
        clean = _store_run(url, finished=finished)
        _corrupt(url, values)
        with Store(url) as store:
            report = store.load_report(RUN)
            assert [t.id for t in report.tasks] == [t.id for t in clean.tasks]
            for task in ("json", "tools", "never-ran"):
                assert report.task(task) == clean.task(task), kind
            france = report.task("france")
            bad, other = france.results
            assert (bad.trial, bad.verdict) == (0, Verdict.ERROR), kind
            _check_marked(bad.error, column)
            assert other == clean.task("france").results[1]
            assert france.errors == 1 and france.trials == 2
            assert report.summary.errors == clean.summary.errors + 1
            # Counted in SQL (every trial, or only those listed): the run is there too.
            for most in (0, 1):
                summed = store.load_report(RUN, max_results=most)
                assert summed.task("tools").trials == clean.task("tools").trials
                assert summed.task("france").trials == 2
        _drop_run(url)


@pytest.mark.parametrize("kind", sorted(SQLITE_ONLY))
def test_a_value_of_the_wrong_type_is_named(sqlite_db_url: str, kind: str) -> None:
    column, values = SQLITE_ONLY[kind]
    _store_run(sqlite_db_url, finished=False)
    _corrupt(sqlite_db_url, values)
    with Store(sqlite_db_url) as store:
        bad = store.load_report(RUN).task("france").results[0]
        _check_marked(bad.error, column)
        listed = queries.list_trials(store, RUN)
    line = next(line for line in listed.lines if (line.task_id, line.index) == ("france", 0))
    if column in LISTED_COLUMNS:
        assert line.verdict is Verdict.ERROR
        _check_marked(line.error, column)


def test_the_trial_listing_shows_the_rest_and_marks_the_bad_trial(db_url: str) -> None:
    for kind in _kinds(db_url):
        column, values = KINDS[kind]
        _store_run(db_url, finished=False)
        with Store(db_url) as store:
            clean = queries.list_trials(store, RUN).lines
        _corrupt(db_url, values)
        with Store(db_url) as store:
            listed = queries.list_trials(store, RUN)
        assert listed.total == len(clean)
        for before, after in zip(clean, listed.lines, strict=True):
            assert (after.task_id, after.index) == (before.task_id, before.index)
            if (after.task_id, after.index) != ("france", 0):
                assert after == before
            elif column in LISTED_COLUMNS:
                assert after.verdict is Verdict.ERROR, kind
                _check_marked(after.error, column)
            else:  # a column the listing does not read
                assert after == before, kind
        _drop_run(db_url)


@pytest.mark.parametrize("fmt", ["table", "md", "json", "junit", "html"])
def test_trialkit_report_shows_the_run_with_the_bad_trial_marked(
    sqlite_db_url: str, fmt: str
) -> None:
    _store_run(sqlite_db_url, finished=True)
    _corrupt(sqlite_db_url, {"scores": "[{not json"})
    result = CliRunner().invoke(cli, ["report", RUN, "--format", fmt, "--store", sqlite_db_url])
    assert result.exit_code == 0, result.output
    assert "stored row could not be read" in result.stdout
    assert "tools" in result.stdout  # the rest of the run
    if fmt == "json":
        data = json.loads(result.stdout)
        france = next(t for t in data["tasks"] if t["id"] == "france")
        assert france["errors"] == 1
        assert france["results"][0]["verdict"] == "error"
        assert france["results"][0]["error"]["message"].startswith(
            "stored row could not be read: scores: "
        )


def _drop_run(url: str) -> None:
    """Remove the run (its rows cascade), so the next kind starts from a clean store."""
    from trialkit.store.schema import (
        labels,
        run_reports,
        run_tasks,
        runs,
        scores,
        search_docs,
        trial_tools,
    )

    engine = create_engine(url, poolclass=NullPool)
    with engine.begin() as conn:
        for table in (labels, search_docs, trial_tools, scores, trials, run_reports, run_tasks):
            conn.execute(table.delete().where(table.c.run_id == RUN))
        conn.execute(runs.delete().where(runs.c.id == RUN))
    engine.dispose()
