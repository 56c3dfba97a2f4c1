"""`trialkit run --models A,B` (one run per model, side by side) and `--trials auto`."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from trialkit import Suite, Task, graders
from trialkit.cli.main import cli
from trialkit.run.matrix import run_models
from trialkit.store import Store

SUITE = """
from trialkit import Suite, Task, graders

suite = Suite(id="mx", kind="regression", trials=3, tasks=[
    Task(id="echo", input="say yes", graders=[graders.contains("yes")]),
    Task(id="hello", input="hello", graders=[graders.contains("hello")]),
])
"""


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRIALKIT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TRIALKIT_MODEL", raising=False)
    (tmp_path / "suite.py").write_text(SUITE)
    return tmp_path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["run", "suite.py", "--no-progress", *args])
    return result.exit_code, result.stdout, result.stderr


def test_models_run_the_suite_once_per_model_and_gate_each(work: Path) -> None:
    code, out, err = run("--models", "scripted/echo,scripted/yes")
    assert code == 1, err  # scripted/yes fails the regression task "hello"
    assert "scripted/echo: 2/2 tasks passed" in out
    assert "scripted/yes: 1/2 tasks passed" in out
    assert "gate failed for scripted/yes: regression tasks did not pass: hello" in err
    side_by_side = out.replace("\n", " ")
    # one task 3/3 -> 0/3 is named as a new failure; alone it is not a significant change
    # (Fisher's exact p = 0.1), and the table beside it says what each model's gate did
    assert "Verdicts: 1 new failure (hello)" in side_by_side
    assert "exact stratified test over 1 task, p = 0.1" in side_by_side
    with sqlite3.connect(work / "store.db") as db:
        names = sorted(row[0] for row in db.execute("select name from runs"))
    assert names == ["mx@scripted/echo", "mx@scripted/yes"]


def test_models_refuse_what_needs_a_single_run(work: Path) -> None:
    code, _, err = run("--models", "scripted/echo,scripted/yes", "--json", "r.json")
    assert code == 2
    assert "--models does not go with --json" in err
    code, _, err = run("--models", "scripted/echo")
    assert (code, "give at least two models" in err) == (2, True)
    code, _, err = run("--models", "scripted/a,scripted/a")
    assert (code, "listed twice" in err) == (2, True)


def test_the_runs_of_a_matrix_interleave(tmp_path: Path) -> None:
    async def slow(prompt: str) -> str:
        await anyio.sleep(0.01)
        return prompt

    suite = Suite(
        id="mx",
        trials=6,
        harness=slow,
        tasks=[Task(id="t", input="x", graders=[graders.contains("x")])],
    )
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        reports = anyio.run(
            lambda: run_models(suite, ["scripted/a", "scripted/b"], concurrency=2, store=store)
        )
        spans = []
        for report in reports:
            starts = [t.started_at for t in store.iter_trials(report.run.id)]
            spans.append((min(starts), max(starts)))
    (a_first, a_last), (b_first, b_last) = spans
    assert all(isinstance(x, datetime) for x in (a_first, a_last, b_first, b_last))
    assert b_first < a_last and a_first < b_last  # neither ran after the other


def test_trials_auto_reports_why_each_task_stopped(work: Path) -> None:
    code, _, err = run(
        "--model", "scripted/echo", "--trials", "auto", "--max-trials", "6", "--json", "r.json"
    )
    assert code == 0, err
    report = json.loads((work / "r.json").read_text())
    tasks = {t["id"]: (t["trials"], t["stopped"]) for t in report["tasks"]}
    # all pass: the interval of 6/6 is still 0.39 wide, so the cap stops them
    assert tasks == {
        "echo": (6, "it reached the most trials allowed (6)"),
        "hello": (6, "it reached the most trials allowed (6)"),
    }

    code, _, err = run("--model", "scripted/yes", "--trials", "auto", "--json", "r.json")
    assert code == 1
    report = json.loads((work / "r.json").read_text())
    hello = next(t for t in report["tasks"] if t["id"] == "hello")
    assert hello["trials"] <= 10  # one failure decides a regression task
    assert hello["stopped"] == "a regression task fails at its first failed trial"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-trials", "4"], "--max-trials goes with --trials auto"),
        (["--precision", "0.1"], "--precision goes with --trials auto"),
        (["--trials", "0"], "expected a whole number >= 1 or auto"),
        (["--trials", "many"], "expected a whole number >= 1 or auto"),
    ],
)
def test_bad_trial_options(work: Path, args: list[str], message: str) -> None:
    code, _, err = run("--model", "scripted/echo", *args)
    assert code == 2
    assert message in err
