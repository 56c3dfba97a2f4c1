"""End-to-end: the `trialkit` command as a subprocess, its exit codes, files and stored rows."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import junitparser
import pytest
import xmlschema

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PYTHON_AGENT = ROOT / "examples" / "python_agent" / "evals.py"
XSD = ROOT / "tests" / "data" / "junit-10.xsd"

SUITES = """
import time
from trialkit import Reply, Suite, Task, TrialContext, graders

def agent(prompt: str, ctx: TrialContext) -> str:
    if prompt == "crash":
        raise RuntimeError("agent crashed")
    if prompt == "slow":
        time.sleep(0.3)
    if prompt == "flaky":
        return "yes" if ctx.trial_index % 2 == 0 else "no"
    return "yes"

good = Suite(id="good", kind="regression", trials=2, harness=agent, tasks=[
    Task(id="a", input="hello", graders=[graders.contains("yes")], tags=["smoke"]),
    Task(id="b", input="hello", graders=[graders.contains("yes")]),
])
broken = Suite(id="broken", kind="regression", trials=2, harness=agent, tasks=[
    Task(id="steady", input="hello", graders=[graders.contains("yes")]),
    Task(id="flaky", input="flaky", graders=[graders.contains("yes")]),
])
capability = Suite(id="cap", kind="capability", trials=2, harness=agent, tasks=[
    Task(id="flaky", input="flaky", graders=[graders.contains("yes")]),
    Task(id="never", input="hello", graders=[graders.contains("no")]),
])
erroring = Suite(id="err", kind="capability", trials=2, harness=agent, tasks=[
    Task(id="ok", input="hello", graders=[graders.contains("yes")]),
    Task(id="crash", input="crash", graders=[graders.contains("yes")]),
])
slow = Suite(id="slow", kind="capability", trials=1, harness=agent, tasks=[
    Task(id=f"t{i}", input="slow") for i in range(40)
])
"""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "suites.py").write_text(SUITES)
    return tmp_path


def trialkit(work: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIALKIT_STORE": str(work / "store.db"), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "trialkit", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def rows(work: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(work / "store.db") as db:
        return db.execute(sql).fetchall()


def test_version(work: Path) -> None:
    out = trialkit(work, "--version")
    assert out.returncode == 0
    assert out.stdout.strip() == "trialkit, version 0.1.0"


def test_python_agent_run_writes_every_report_and_stores_every_trial(work: Path) -> None:
    out = trialkit(
        work,
        "run",
        str(PYTHON_AGENT) + ":capability",
        "--json",
        "r/c.json",
        "--markdown",
        "r/c.md",
        "--junit",
        "r/c.xml",
        "--name",
        "qs",
    )
    assert out.returncode == 0, out.stderr
    assert "3/4 tasks passed, pass rate 70.0% over 20 trials, 0 errors" in out.stdout
    report = json.loads((work / "r/c.json").read_text())
    assert report["schema_version"] == 1
    assert report["suite"] == {
        "id": "python-agent-capability",
        "kind": "capability",
        "description": None,
    }
    summary = report["summary"]
    assert (summary["tasks"], summary["trials"], summary["passed_tasks"]) == (4, 20, 3)
    assert summary["pass_at_k"]["5"] == 0.75
    assert summary["pass_hat_k"]["5"] == 0.5
    assert summary["cost_usd"] is None
    assert "| boiling-point |" in (work / "r/c.md").read_text()
    xmlschema.XMLSchema(str(XSD)).validate(str(work / "r/c.xml"))
    suite = next(iter(junitparser.JUnitXml.fromfile(str(work / "r/c.xml"))))
    # A capability task that failed does not fail the gate: skipped, not a red <failure>.
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 0, 0, 1)
    run_id = report["run"]["id"]
    assert rows(work, f"select status, name from runs where id = '{run_id}'") == [
        ("completed", "qs")
    ]
    assert rows(work, f"select count(*) from trials where run_id = '{run_id}'") == [(20,)]
    assert rows(work, f"select count(*) from scores where run_id = '{run_id}'") == [(30,)]


def test_python_agent_regression_passes(work: Path) -> None:
    out = trialkit(work, "run", str(PYTHON_AGENT) + ":regression", "--quiet")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("4/4 tasks passed")


def test_a_failing_regression_task_fails_the_gate(work: Path) -> None:
    out = trialkit(work, "run", "suites.py:broken", "--no-progress")
    assert out.returncode == 1
    assert "gate failed: regression tasks did not pass: flaky" in out.stderr
    assert "flaky" in out.stdout


def test_min_pass_rate(work: Path) -> None:
    assert trialkit(work, "run", "suites.py:capability", "-q").returncode == 0
    out = trialkit(work, "run", "suites.py:capability", "-q", "--min-pass-rate", "50%")
    assert out.returncode == 1
    assert "pass rate 25.0% is under the minimum 50.0%" in out.stderr
    assert (
        trialkit(work, "run", "suites.py:capability", "-q", "--min-pass-rate", "0.2").returncode
        == 0
    )


def test_errors_exit_3_unless_allowed(work: Path) -> None:
    out = trialkit(work, "run", "suites.py:erroring", "--no-progress")
    assert out.returncode == 3
    assert "gate failed: 2 of 4 trials errored (allowed: none)" in out.stderr
    assert "RuntimeError: agent crashed" in out.stdout
    assert trialkit(work, "run", "suites.py:erroring", "-q", "--fail-on-error", "2").returncode == 0
    assert (
        trialkit(work, "run", "suites.py:erroring", "-q", "--fail-on-error", "0.5").returncode == 0
    )
    assert (
        trialkit(work, "run", "suites.py:erroring", "-q", "--fail-on-error", "0.25").returncode == 3
    )


def test_selection(work: Path) -> None:
    out = trialkit(
        work, "run", "suites.py:good", "--tag", "smoke", "--trials", "1", "--json", "r.json", "-q"
    )
    assert out.returncode == 0, out.stderr
    report = json.loads((work / "r.json").read_text())
    assert [(t["id"], t["trials"]) for t in report["tasks"]] == [("a", 1)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["suites.py:good", "--task", "nope"], "no tasks matching --task nope; nothing to run"),
        (["suites.py"], "defines 5 suites"),
        (["missing.py"], "missing.py: no such file"),
        (["suites.py:good", "--min-pass-rate", "2"], "--min-pass-rate: must be between 0 and 1"),
        (["suites.py:good", "--fail-on-error", "1.5"], "--fail-on-error: expected a whole count"),
        (["suites.py:good", "--trials", "0"], "--trials: expected a whole number >= 1 or auto"),
    ],
)
def test_bad_usage_exits_2_and_runs_nothing(work: Path, args: list[str], message: str) -> None:
    out = trialkit(work, "run", *args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    if (work / "store.db").exists():
        assert rows(work, "select count(*) from runs") == [(0,)]


def test_debug_shows_the_traceback(work: Path) -> None:
    out = trialkit(work, "run", "suites.py:good", "--task", "nope", "--debug")
    assert out.returncode == 2
    assert "Traceback" in out.stderr


def test_runs_and_report_rerender_stored_runs(work: Path) -> None:
    first = trialkit(
        work, "run", "suites.py:capability", "-q", "--name", "nightly", "--json", "first.json"
    )
    assert first.returncode == 0
    trialkit(work, "run", "suites.py:good", "-q", "--name", "nightly")
    listing = json.loads(trialkit(work, "runs", "--json").stdout)
    assert [(r["suite_id"], r["name"], r["trials"]) for r in listing] == [
        ("good", "nightly", 4),
        ("cap", "nightly", 4),
    ]
    table = trialkit(work, "runs").stdout
    assert "nightly" in table and "cap" in table

    run_id = json.loads((work / "first.json").read_text())["run"]["id"]
    again = trialkit(work, "report", run_id[:-2], "--format", "json")
    assert again.returncode == 0
    assert json.loads(again.stdout) == json.loads((work / "first.json").read_text())
    latest = json.loads(trialkit(work, "report", "nightly", "--format", "json").stdout)
    assert latest["suite"]["id"] == "good"
    md = trialkit(work, "report", run_id, "--format", "md")
    assert "never" in md.stdout
    junit = trialkit(work, "report", run_id, "--format", "junit", "-o", "r.xml")
    assert junit.returncode == 0
    xmlschema.XMLSchema(str(XSD)).validate(str(work / "r.xml"))
    table = trialkit(work, "report", run_id)
    assert "pass@2" in table.stdout


def test_report_of_an_unknown_run(work: Path) -> None:
    trialkit(work, "run", "suites.py:good", "-q")
    out = trialkit(work, "report", "no-such-run")
    assert out.returncode == 2
    assert out.stderr.startswith("error: ")
    assert "no-such-run" in out.stderr


@pytest.mark.parametrize(
    ("writer", "whole_group"), [("thread", False), ("process", False), ("process", True)]
)
def test_ctrl_c_stores_what_finished_and_exits_130(
    work: Path, writer: str, whole_group: bool
) -> None:
    """Whoever saves the trials (a thread, or the writer process with a batch in flight), what
    finished is stored and counted; a terminal's Ctrl-C reaches the writer process too (the
    whole process group), and the run's process then saves the rest itself."""
    env = {
        **os.environ,
        "TRIALKIT_STORE": str(work / "store.db"),
        "TRIALKIT_STORE_WRITER": writer,
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trialkit",
            "run",
            "suites.py:slow",
            "--concurrency",
            "2",
            "--no-progress",
        ],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=whole_group,
    )
    deadline = time.monotonic() + 20
    stored = 0
    while time.monotonic() < deadline and stored < 4:
        time.sleep(0.1)
        if (work / "store.db").exists():
            try:
                stored = rows(work, "select count(*) from trials")[0][0]  # type: ignore[assignment]
            except sqlite3.OperationalError:
                stored = 0
    assert stored >= 4
    if whole_group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "interrupted" in err
    ((status, run_id),) = rows(work, "select status, id from runs")
    assert status == "interrupted"
    kept = rows(work, f"select count(*) from trials where run_id = '{run_id}'")[0][0]
    assert isinstance(kept, int) and stored <= kept < 40
    assert f"{kept} finished trials are stored in run {run_id}" in err


def test_trace_jsonl_streams_every_trial(work: Path) -> None:
    out = trialkit(work, "run", "suites.py:good", "-q", "--trace-jsonl", "trace.jsonl")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in (work / "trace.jsonl").read_text().splitlines()]
    assert [line["type"] for line in lines] == [
        "run",
        "trial",
        "trial",
        "trial",
        "trial",
        "run_end",
    ]
    trial = lines[1]
    assert trial["task_id"] in {"a", "b"} and trial["verdict"] == "pass"
    messages = [e for e in trial["events"] if e["type"] == "message"]
    assert messages and all("content" not in m for m in messages)  # only with --include-content
    out = trialkit(
        work, "run", "suites.py:good", "-q", "--trace-jsonl", "full.jsonl", "--include-content"
    )
    full = [json.loads(line) for line in (work / "full.jsonl").read_text().splitlines()]
    assert any(e.get("content") == "yes" for e in full[1]["events"] if e["type"] == "message")
    assert trialkit(work, "run", "suites.py:good", "--include-content").returncode == 2


def test_export_a_stored_run_to_jsonl(work: Path) -> None:
    trialkit(work, "run", "suites.py:good", "-q", "--name", "exported")
    out = trialkit(work, "export", "exported", "--to", "jsonl", "-o", "out.jsonl")
    assert out.returncode == 0, out.stderr
    types = [json.loads(line)["type"] for line in (work / "out.jsonl").read_text().splitlines()]
    assert types.count("trial") == 4
