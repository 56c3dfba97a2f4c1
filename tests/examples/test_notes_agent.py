"""examples/notes_agent runs offline and its graders catch the mistakes they are there for."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trialkit import Suite, run_sync
from trialkit.loaders.python import load_suite
from trialkit.models import ModelRequest, ScriptedModel
from trialkit.transcript import ToolCall

ROOT = Path(__file__).resolve().parents[2]
EVALS = ROOT / "examples" / "notes_agent" / "evals.py"


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Suite:
    monkeypatch.chdir(tmp_path)  # failing trials' workspaces are kept under .trialkit/
    monkeypatch.delenv("NOTES_AGENT_MODEL", raising=False)
    return load_suite(str(EVALS))


def only(suite: Suite, task_id: str, model: ScriptedModel | None = None) -> Suite:
    task = next(t for t in suite.tasks if t.id == task_id)
    changes: dict[str, object] = {"tasks": [task]}
    if model is not None:
        changes["model"] = model
    return dataclasses.replace(suite, **changes)


@pytest.mark.e2e
def test_the_example_runs_from_the_command_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NOTES_AGENT_MODEL"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trialkit",
            "run",
            str(EVALS),
            "--json",
            "r.json",
            "--no-progress",
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    tasks = {t["id"]: (t["verdict"], t["passed"], t["trials"]) for t in report["tasks"]}
    assert tasks == {
        "file-sleep-entry": ("pass", 5, 5),
        "file-review-entry": ("pass", 3, 5),  # the scripted agent's habit on odd trials
        "ask-before-filing": ("pass", 5, 5),
        "refuse-missing-area": ("pass", 5, 5),
    }
    assert report["summary"]["errors"] == 0


def writes_at_once(path: str, text: str, answer: str) -> ScriptedModel:
    """A careless agent: writes `path` before anything else, then says `answer`."""

    def step(request: ModelRequest, trial: int) -> str | ToolCall:
        if any(m.role == "tool" for m in request.messages):
            return answer
        return ToolCall(id="c1", name="write_note", arguments={"path": path, "text": text})

    return ScriptedModel("careless", step)


def test_filing_before_being_asked_is_caught_by_the_probe(suite: Suite) -> None:
    hasty = writes_at_once("Areas/Home/2026-11-27 Boiler.md", "knocking noise", "Filed it.")
    report = run_sync(only(suite, "ask-before-filing", hasty), trials=1)
    (task,) = report.tasks
    assert task.verdict == "fail"
    (trial,) = task.results
    probe = next(s for s in trial.scores if s.name == "probe(boiler_note)")
    assert probe.verdict == "fail"
    assert probe.rationale == "after each turn: [True, True], expected [False, True]"


def test_writing_outside_the_area_or_skipping_the_index_fails(suite: Suite) -> None:
    sloppy = writes_at_once("Areas/Work/2026-11-28 Sleep.md", "awake from 3am", "Done.")
    report = run_sync(only(suite, "file-sleep-entry", sloppy), trials=1)
    (trial,) = report.tasks[0].results
    failed = {s.name for s in trial.scores if s.verdict == "fail"}
    assert "tool_order('read_index', 'write_note', 'link_note')" in failed
    assert any(name.startswith("file_contains('Areas/Health/") for name in failed)
    assert any(name.startswith("only_changed(") for name in failed)


def test_an_agent_that_files_the_impossible_entry_anyway_fails(suite: Suite) -> None:
    eager = writes_at_once("Areas/Home/2026-11-30 Bills.md", "paid", "Filed it under Home.")
    report = run_sync(only(suite, "refuse-missing-area", eager), trials=1)
    (trial,) = report.tasks[0].results
    failed = {s.name for s in trial.scores if s.verdict == "fail"}
    assert failed >= {"agent_failed", "tool_not_called('write_note')"}
    assert any(name.startswith("unchanged(") for name in failed)


def test_the_tools_refuse_paths_outside_the_notes(suite: Suite) -> None:
    escape = ToolCall(id="c1", name="read_note", arguments={"path": "../../../../etc/hostname"})
    model = ScriptedModel("escape", [escape, "done"])
    report = run_sync(only(suite, "file-sleep-entry", model), trials=1)
    (trial,) = report.tasks[0].results
    tool_errors = next(s for s in trial.scores if s.name == "no_tool_errors")
    assert tool_errors.verdict == "fail"
    assert "is outside the notes f" in (tool_errors.rationale or "")
