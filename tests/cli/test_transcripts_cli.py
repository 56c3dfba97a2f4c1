"""`trialkit transcripts list|show|diff` over a store built from hand-made trials."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, event

from tests.reports.test_transcript_render import (
    STARTED,
    agent_trial,
    different_trial,
    errored_trial,
)
from trialkit.cli.transcripts import transcripts_command
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.task import SuiteKind
from trialkit.trial import Trial, TrialStatus

SUITE = SuiteInfo(id="notes-suite", kind=SuiteKind.REGRESSION)
PLANS = [TaskPlan(id=task, kind=SuiteKind.REGRESSION) for task in ("notes", "france", "idle")]


def france(run_id: str, index: int, *, passed: bool) -> Trial:
    rationale = None if passed else "no 'paris'\nsecond line"
    return Trial(
        run_id=run_id,
        task_id="france",
        index=index,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS if passed else Verdict.FAIL,
        scores=[
            Score.from_bool(True, name="not_empty"),
            Score.from_bool(passed, name="contains('paris')", rationale=rationale),
        ],
        started_at=STARTED,
        duration_s=1.5,
    )


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    """Run `run-a` ("nightly") with four trials, then the later run `run-b` with one."""
    url = f"sqlite:///{tmp_path}/s.db"
    with Store(url) as store:
        store.create_run(RunInfo(id="run-a", name="nightly", started_at=STARTED), SUITE, PLANS)
        store.save_trials(
            [
                agent_trial("run-a"),
                errored_trial("run-a", 1),
                france("run-a", 0, passed=False),
                france("run-a", 1, passed=True),
            ]
        )
        later = STARTED + timedelta(hours=1)
        store.create_run(RunInfo(id="run-b", started_at=later), SUITE, PLANS)
        store.save_trials([different_trial()])
    return url


def invoke(store_url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(transcripts_command, [*args, "--store", store_url])
    return result.exit_code, result.stdout, result.stderr


def rows(out: str) -> list[list[str]]:
    """The table rows of `transcripts list` (under the run line and the header), split on
    runs of two spaces or more."""
    lines = out.splitlines()[2:]
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in lines if line]


# -- list --------------------------------------------------------------------------------------


def test_list_shows_the_latest_run_by_default(store_url: str) -> None:
    code, out, err = invoke(store_url, "list")

    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "run run-b · 1 trial"
    assert rows(out) == [
        [
            "notes#0",
            "✗ fail",
            "completed",
            "3.60 s",
            "1,280/346",
            "$0.0021",
            "tool_called('read_file')",
        ]
    ]


def test_list_a_run_in_task_order_with_why_each_trial_did_not_pass(store_url: str) -> None:
    code, out, _ = invoke(store_url, "list", "--run", "nightly")

    assert code == 0
    assert out.splitlines()[0] == "run run-a (nightly) · 4 trials"
    assert [row[:3] for row in rows(out)] == [
        ["notes#0", "✓ pass", "completed"],
        ["notes#1", "! error", "error"],
        ["france#0", "✗ fail", "completed"],
        ["france#1", "✓ pass", "completed"],
    ]
    assert rows(out)[1][-1] == "RuntimeError: disk full (during agent)"
    assert rows(out)[2][-1] == "contains('paris'): no 'paris' ⏎ second line"
    assert "\x1b" not in out  # piped: no colours


def test_list_filters_by_task_glob_verdict_and_limit(store_url: str) -> None:
    _, out, _ = invoke(store_url, "list", "--run", "run-a", "--task", "fr*")
    assert [row[0] for row in rows(out)] == ["france#0", "france#1"]

    _, out, _ = invoke(store_url, "list", "--run", "run-a", "--status", "fail")
    assert [row[0] for row in rows(out)] == ["france#0"]

    _, out, _ = invoke(store_url, "list", "--run", "run-a", "--task", "notes", "--status", "pass")
    assert [row[0] for row in rows(out)] == ["notes#0"]

    _, out, _ = invoke(store_url, "list", "--run", "run-a", "--limit", "1")
    assert out.splitlines()[0] == "run run-a (nightly) · 1 of 4 trials (--limit)"
    assert [row[0] for row in rows(out)] == ["notes#0"]


def test_list_json(store_url: str) -> None:
    code, out, _ = invoke(store_url, "list", "--run", "run-a", "--status", "error", "--json")

    assert code == 0
    [line] = json.loads(out)
    assert line["run_id"] == "run-a"
    assert (line["task_id"], line["index"], line["verdict"], line["status"]) == (
        "notes",
        1,
        "error",
        "error",
    )
    assert line["error"]["type"] == "RuntimeError"
    assert "transcript" not in line


def test_list_a_task_the_run_lacks_names_its_tasks(store_url: str) -> None:
    code, out, err = invoke(store_url, "list", "--task", "germ*")

    assert (code, out) == (2, "")
    assert err == (
        "error: run run-b has no task matching 'germ*'; its tasks: notes, france, idle\n"
    )


def test_list_reads_no_transcript_outcome_or_scores_json(store_url: str) -> None:
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        assert invoke(store_url, "list", "--run", "run-a")[0] == 0
    finally:
        event.remove(Engine, "before_cursor_execute", record)

    reads = [s for s in statements if "FROM trials" in s]
    assert reads
    selected = {column for s in reads for column in re.findall(r"\btrials\.(\w+)", s)}
    wide = {"transcript", "outcome", "scores", "output", "usage", "grader_usage"}
    assert not selected & wide, selected


def test_list_an_empty_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/empty.db"
    Store(url).close()
    assert invoke(url, "list")[:2] == (0, "no runs yet: `trialkit run TARGET` makes one\n")
    assert invoke(url, "list", "--json")[:2] == (0, "[]\n")


# -- show --------------------------------------------------------------------------------------


def test_show_a_trial_in_reading_order(store_url: str) -> None:
    code, out, err = invoke(store_url, "show", "nightly/notes#0")

    assert (code, err) == (0, "")
    expected_in_order = [
        "notes#0 · run run-a (nightly) · ✓ pass",
        "tokens 2,086 (agent 1,280 in / 346 out; graders 400 in / 60 out)",
        "turn 0 · 2.50 s",
        "user: Tidy notes.md: capitalise each item.",
        "thinking: The user wants capitals. (+2 lines, --full to show)",
        '→ read_file {"path": "notes.md"} · 0.01 s',
        "← ✗ error: PermissionError: notes.md is read-only",
        "← no result",
        "model call openai/gpt-4o-mini · agent · 1,200 in / 340 out · 1.25 s · $0.0012 · 1 retry",
        "turn 1 · 0.40 s",
        "outcome",
        "-- buy milk",
        "+- Buy milk",
        "scores",
        "✓ judge 0.90: Both items are capitalised; nothing else changed.",
        "✓ no_errors: none raised",
    ]
    positions = [out.find(line) for line in expected_in_order]
    assert -1 not in positions, [line for line in expected_in_order if line not in out]
    assert positions == sorted(positions)


def test_show_prints_user_content_literally(store_url: str, tmp_path: Path) -> None:
    trial = agent_trial("run-a")
    trial.transcript.messages[-1].content = "[bold]x[/bold] \x1b[2Jcleared"
    with Store(store_url) as store:
        store.save_trials([trial])

    _, out, _ = invoke(store_url, "show", "run-a/notes")

    assert "assistant: [bold]x[/bold] \\x1b[2Jcleared" in out
    assert "\x1b" not in out


def test_show_the_error_and_its_traceback_with_full(store_url: str) -> None:
    _, out, _ = invoke(store_url, "show", "run-a/notes#1")
    assert "! RuntimeError: disk full (during agent)" in out
    assert "traceback: 6 lines, --full to show" in out
    assert 'raise RuntimeError("disk full")' not in out

    _, out, _ = invoke(store_url, "show", "run-a/notes#1", "--full")
    assert 'raise RuntimeError("disk full")' in out


def test_show_json_round_trips(store_url: str) -> None:
    code, out, _ = invoke(store_url, "show", "run-a/notes#0", "--json")

    assert code == 0
    assert Trial.model_validate(json.loads(out)) == agent_trial("run-a")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("notes#0", "'notes#0' is not a trial: write RUN/TASK#N, e.g. nightly/france#0"),
        (
            "run-a/notes#x",
            "'run-a/notes#x' is not a trial: write RUN/TASK#N, e.g. nightly/france#0",
        ),
        ("run-a/#0", "'run-a/#0' is not a trial: write RUN/TASK#N, e.g. nightly/france#0"),
        ("nope/notes#0", "no run matches 'nope' (by id, id prefix or name)"),
        ("run/notes#0", "run 'run' is ambiguous: it starts the ids of run-b, run-a (nightly)"),
        (
            "run-a/germany#0",
            "run run-a has no task 'germany'; its tasks: notes, france, idle",
        ),
        ("run-a/notes#7", "run run-a has no trial notes#7; task 'notes' has trials #0, #1"),
        ("run-a/idle#0", "run run-a has no stored trial of task 'idle' yet"),
    ],
)
def test_show_a_bad_reference_is_one_line_and_exit_2(
    store_url: str, ref: str, message: str
) -> None:
    code, out, err = invoke(store_url, "show", ref)

    assert (code, out) == (2, "")
    assert err.startswith(f"error: {message}")
    assert err.count("\n") == 1


# -- diff --------------------------------------------------------------------------------------


def test_diff_shows_exactly_what_differs(store_url: str) -> None:
    code, out, err = invoke(store_url, "diff", "--task", "notes", "--runs", "nightly,run-b")

    assert (code, err) == (0, "")
    assert "A  run-a (nightly) · ✓ pass" in out
    assert "B  run-b · ✗ fail" in out
    assert "differences: verdict pass → fail; 1 message; 1 tool call; 1 score" in out
    marked = [
        line.strip() for line in out.splitlines() if line.lstrip().startswith(("~", "-", "+"))
    ]
    assert marked == [
        "~ assistant: Let me [-read-]{+open+} the file first.",
        '~ → read_file {"path": "notes.md"} · 0.01 s',
        "~  tool_called('read_file')    ✓ pass 1.00  ✗ fail 0.00",
    ]
    assert 'arguments: {"path": [-"notes.md"}-]{+"./notes.md"}+}' in out


def test_diff_json(store_url: str) -> None:
    code, out, _ = invoke(store_url, "diff", "--task", "notes", "--runs", "run-a,run-b", "--json")

    assert code == 0
    diff = json.loads(out)
    assert (diff["task_id"], diff["trial"], diff["same"]) == ("notes", 0, False)
    assert (diff["a"]["run_id"], diff["b"]["run_id"]) == ("run-a", "run-b")
    calls = [c for t in diff["turns"] for c in t["tool_calls"] if c["change"] != "same"]
    assert [(c["fields"], c["a"]["arguments"], c["b"]["arguments"]) for c in calls] == [
        (["arguments"], {"path": "notes.md"}, {"path": "./notes.md"})
    ]


def test_diff_a_trial_with_itself(store_url: str) -> None:
    _, out, _ = invoke(store_url, "diff", "--task", "france", "--runs", "run-a,run-a")
    assert "no differences in messages, tool calls, outcome or scores" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "notes", "--runs", "run-a"], "--runs takes two runs separated by a comma"),
        (["--task", "notes", "--runs", "run-a,"], "--runs takes two runs separated by a comma"),
        (["--task", "france", "--runs", "run-a,run-b"], "run run-b has no stored trial of task"),
        (["--task", "notes", "--runs", "run-a,run-b", "--trial", "1"], "run run-b has no trial"),
        (["--task", "paris", "--runs", "run-a,run-b"], "run run-a has no task 'paris'; its tasks"),
        (["--task", "notes", "--runs", "run-a,zzz"], "no run matches 'zzz'"),
    ],
)
def test_diff_errors_are_one_line_and_exit_2(store_url: str, args: list[str], message: str) -> None:
    code, out, err = invoke(store_url, "diff", *args)

    assert (code, out) == (2, "")
    assert err.startswith(f"error: {message}")
    assert err.count("\n") == 1
