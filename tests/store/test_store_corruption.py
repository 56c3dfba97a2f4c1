"""Rows changed behind trialkit's back, and nothing is rewritten.

A run's reports and listings show the rest of the run, with a trial whose row cannot be read
as an error naming the column and what is wrong with it. What reads one trial in full (its
transcript, an export) and what reads a run's own row raise one `StoreError` line naming the
run (and the trial) and the column, which the CLI prints with exit 2."""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, update

from trialkit.cli.main import cli
from trialkit.store import Store, StoreError
from trialkit.store.schema import runs, scores, trials
from trialkit.store.urls import sqlite_url

from ._samples import make_sample

RUN = "run-corrupt"

TRIAL_CORRUPTIONS: dict[str, dict[str, Any]] = {
    "verdict": {"verdict": "maybe"},
    "status": {"status": "exploded"},
    "started_at": {"started_at": "yesterday"},
    "scores": {"scores": "[{not json"},
    "scores_shape": {"scores": '[{"verdict": 7}]'},
    "usage": {"usage": '{"input_tokens": "many"}'},
    "error": {"error": "{"},
    "transcript": {"transcript": "{]", "transcript_packed": None},
    "transcript_packed": {"transcript": "", "transcript_packed": b"z" + b"not zlib at all"},
    "transcript_packed_utf8": {
        "transcript": "",
        "transcript_packed": b"z" + zlib.compress(b"\xff\xfe{}"),
    },
    "transcript_packed_kind": {"transcript": "", "transcript_packed": b"q123"},
    "outcome": {"outcome": "[1, 2]", "outcome_packed": None},
    "grader_usage": {"grader_usage": "null"},
}
"""Each corrupts the trial france#0."""
COLUMN_OF = {
    "scores_shape": "scores",
    "transcript_packed_utf8": "transcript",
    "transcript_packed_kind": "transcript",
}

RUN_CORRUPTIONS: dict[str, dict[str, Any]] = {
    "started_at": {"started_at": "2025-13-45"},
    "finished_at": {"finished_at": "soon"},
    "config": {"config": "{oops"},
    "suite_kind": {"suite_kind": "sideways"},
}


def _stored(tmp_path: Path) -> str:
    url = sqlite_url(tmp_path / "store" / "trialkit.db")
    sample = make_sample(RUN)
    with Store(url) as store:
        store.create_run(sample.run, sample.suite, sample.plans)
        store.save_trials(sample.trials)
    return url


def _corrupt(url: str, table: Any, values: dict[str, Any], **where: Any) -> str:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(update(table).where(*(table.c[k] == v for k, v in where.items())), values)
    engine.dispose()
    return _digest(url)


def _digest(url: str) -> str:
    path = Path(url.removeprefix("sqlite:///"))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


@pytest.mark.parametrize("kind", sorted(TRIAL_CORRUPTIONS))
def test_a_corrupted_trial_row_is_named_by_what_reads_the_trial_whole(
    tmp_path: Path, kind: str
) -> None:
    url = _stored(tmp_path)
    before = _corrupt(url, trials, TRIAL_CORRUPTIONS[kind], run_id=RUN, task_id="france", idx=0)
    column = COLUMN_OF.get(kind, kind.removesuffix("_packed").removesuffix("_kind"))
    with Store(url) as store:
        readers = [lambda: store.load_trial(RUN, "france", 0), lambda: list(store.iter_trials(RUN))]
        for read in readers:
            with pytest.raises(StoreError) as caught:
                read()
            message = _one_line(caught.value)
            assert RUN in message and "france" in message, message
            assert f"column {column}" in message, message
            assert "france#0" in message or "task 'france'" in message, message
    assert _digest(url) == before


@pytest.mark.parametrize("kind", sorted(RUN_CORRUPTIONS))
def test_a_corrupted_run_row_names_the_run(tmp_path: Path, kind: str) -> None:
    url = _stored(tmp_path)
    before = _corrupt(url, runs, RUN_CORRUPTIONS[kind], id=RUN)
    with Store(url) as store:
        readers = [lambda: store.load_report(RUN)]
        if kind in ("started_at", "finished_at"):
            readers.append(lambda: store.list_runs())
        for read in readers:
            with pytest.raises(StoreError) as caught:
                read()
            message = _one_line(caught.value)
            assert RUN in message and kind in message, message
    assert _digest(url) == before


def test_a_corrupted_score_value_is_no_score(tmp_path: Path) -> None:
    url = _stored(tmp_path)
    with Store(url) as store:
        whole = store.load_report(RUN, max_results=1)
    before = _corrupt(url, scores, {"value": float("inf")}, run_id=RUN, task_id="france")
    with Store(url) as store:
        report = store.load_report(RUN, max_results=1)  # summed in SQL
    assert report.task("france").trials == whole.task("france").trials
    assert report.task("france").mean_score != whole.task("france").mean_score
    assert report.task("tools") == whole.task("tools")
    assert _digest(url) == before


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["runs"], "started_at"),
        (["export", RUN, "--to", "jsonl"], "transcript_packed"),
        (["transcripts", "show", f"{RUN}/france#0"], "transcript"),
        (["transcripts", "show", f"{RUN}/france#0"], "started_at"),
    ],
)
def test_the_cli_prints_one_line_and_exits_2(tmp_path: Path, args: list[str], kind: str) -> None:
    url = _stored(tmp_path)
    if args == ["runs"]:
        before = _corrupt(url, runs, {"started_at": "not a time"}, id=RUN)
    else:
        values = TRIAL_CORRUPTIONS[kind]
        before = _corrupt(url, trials, values, run_id=RUN, task_id="france", idx=0)
    result = CliRunner().invoke(cli, [*args, "--store", url])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and RUN in lines[0]
    assert _digest(url) == before
