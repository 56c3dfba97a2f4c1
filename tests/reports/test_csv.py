"""`trialkit report RUN --format csv`: one row per trial, streamed from the store."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit._record import ErrorInfo
from trialkit.cli.main import cli
from trialkit.outcome import Outcome
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.reports.csv import MAX_CELL_CHARS, text_cell, write_csv
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import Trial, TrialStatus

STARTED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SUITE = SuiteInfo(id="caps", kind=SuiteKind.CAPABILITY)
TASKS = ("spain", "france", "evil")  # the suite's order, not alphabetical


def make_trial(
    task: str,
    index: int,
    output: str | None = "Paris",
    *,
    scores: list[Score] | None = None,
    error: ErrorInfo | None = None,
    cost: float | None = 0.002,
    run_id: str = "r1",
) -> Trial:
    if scores is None:
        scores = [Score.from_bool(True, name="contains('paris')")]
    status = TrialStatus.COMPLETED if error is None else TrialStatus.ERROR
    return Trial(
        run_id=run_id,
        task_id=task,
        index=index,
        status=status,
        verdict=Verdict.ERROR if error else Verdict.PASS,
        model="openai/gpt-4o-mini",
        outcome=Outcome(output=output),
        scores=scores,
        error=error,
        usage=Usage(input_tokens=10 + index, output_tokens=5),
        cost_usd=cost,
        started_at=STARTED,
        duration_s=1.25,
    )


def create(store: Store, run_id: str = "r1", tasks: tuple[str, ...] = TASKS) -> None:
    store.create_run(
        RunInfo(id=run_id, started_at=STARTED),
        SUITE,
        [TaskPlan(id=task, kind=SuiteKind.CAPABILITY) for task in tasks],
    )


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """Run r1: three tasks × three trials, graders that differ by task, one errored trial and
    outputs that look like formulas."""
    url = f"sqlite:///{tmp_path}/s.db"
    judge = Score.from_value(0.75, pass_at=0.5, name="judge('Names it.')")
    with Store(url) as store:
        create(store)
        store.save_trials(
            [
                *(
                    make_trial("france", i, scores=[judge, make_trial("x", 0).scores[0]])
                    for i in range(3)
                ),
                make_trial(
                    "spain", 0, "Madrid", scores=[Score.from_bool(False, name="contains('paris')")]
                ),
                make_trial(
                    "spain",
                    1,
                    None,
                    scores=[],
                    cost=None,
                    error=ErrorInfo(
                        type="TimeoutError", message="the agent took too long", phase="agent"
                    ),
                ),
                make_trial("spain", 2, "Madrid"),
                make_trial("evil", 0, '=HYPERLINK("http://x","y")'),
                make_trial("evil", 1, "+1+2"),
                make_trial(
                    "evil", 2, "@SUM(A1)", scores=[Score.from_bool(True, name="=cmd|' /C calc'!A0")]
                ),
            ]
        )
    return url


def export(store_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["report", "r1", "--format", "csv", "--store", store_url, *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_one_row_per_trial_with_a_score_column_per_grader(store_url: str) -> None:
    code, out, err = export(store_url)

    assert (code, err) == (0, "")
    reader = csv.DictReader(io.StringIO(out))
    rows = list(reader)
    assert reader.fieldnames == [
        "run_id",
        "task",
        "trial",
        "verdict",
        "status",
        "score:contains('paris')",  # first seen in spain, the suite's first task
        "score:judge('Names it.')",
        "score:=cmd|' /C calc'!A0",  # a header cell starts with score: and is never a formula
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cost_usd",
        "duration_s",
        "model",
        "error",
        "output",
    ]
    assert len(rows) == 9
    assert [(r["task"], r["trial"]) for r in rows] == [
        (task, str(i)) for task in TASKS for i in range(3)
    ]
    first = rows[0]
    assert first == {
        "run_id": "r1",
        "task": "spain",
        "trial": "0",
        "verdict": "pass",
        "status": "completed",
        "score:contains('paris')": "0.0",
        "score:judge('Names it.')": "",
        "score:=cmd|' /C calc'!A0": "",
        "input_tokens": "10",
        "output_tokens": "5",
        "total_tokens": "15",
        "cost_usd": "0.002",
        "duration_s": "1.25",
        "model": "openai/gpt-4o-mini",
        "error": "",
        "output": "Madrid",
    }
    france = rows[3]
    assert (france["score:contains('paris')"], france["score:judge('Names it.')"]) == (
        "1.0",
        "0.75",
    )


def test_an_errored_trial_shows_its_error(store_url: str) -> None:
    _, out, _ = export(store_url)
    row = list(csv.DictReader(io.StringIO(out)))[1]

    assert row["verdict"] == "error"
    assert row["status"] == "error"
    assert row["error"] == "TimeoutError: the agent took too long"
    assert (row["output"], row["cost_usd"], row["score:contains('paris')"]) == ("", "", "")


def test_formula_looking_cells_are_written_as_text(store_url: str) -> None:
    _, out, _ = export(store_url)
    evil = [r["output"] for r in csv.DictReader(io.StringIO(out)) if r["task"] == "evil"]

    assert evil == ['\'=HYPERLINK("http://x","y")', "'+1+2", "'@SUM(A1)"]
    assert text_cell("-2") == "'-2"
    assert text_cell("\t=1") == "'\t=1"
    assert text_cell("Paris = capital") == "Paris = capital"


def test_a_long_output_is_cut_under_the_cell_cap(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    with Store(url) as store:
        create(store, tasks=("long",))
        store.save_trials([make_trial("long", 0, "x" * 40_000)])
        out = io.StringIO()
        assert write_csv(store, "r1", out) == 1
    output = next(csv.DictReader(io.StringIO(out.getvalue())))["output"]
    assert output == "x" * MAX_CELL_CHARS + "…[cut: 40000 chars]"
    assert len(output) <= 32_767


def test_o_writes_the_file_and_an_unknown_run_is_one_line(store_url: str, tmp_path: Path) -> None:
    target = tmp_path / "out" / "r1.csv"
    code, out, _ = export(store_url, "-o", str(target))
    assert (code, out) == (0, "")
    with target.open(encoding="utf-8", newline="") as f:
        assert len(list(csv.DictReader(f))) == 9

    result = CliRunner().invoke(cli, ["report", "nope", "--format", "csv", "--store", store_url])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no run matches 'nope'")
    assert result.stderr.count("\n") == 1


def test_many_trials_stream_out(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    tasks = tuple(f"t{i}" for i in range(200))
    with Store(url) as store:
        create(store, tasks=tasks)
        for task in tasks:
            store.save_trials([make_trial(task, i) for i in range(100)])
        target = tmp_path / "big.csv"
        with target.open("w", encoding="utf-8", newline="") as f:
            assert write_csv(store, "r1", f) == 20_000
    with target.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 20_000
    assert (rows[-1]["task"], rows[-1]["trial"]) == ("t199", "99")
    assert {row["score:contains('paris')"] for row in rows} == {"1.0"}
