"""`--resume`: finish a stored run, even one killed with SIGKILL, as if it never stopped."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trialkit import Suite, Task, TrialContext, graders, run_sync
from trialkit.store import Store
from trialkit.store.resume import stored_verdicts
from trialkit.task import SuiteError

FLAKY = {"calls": 0}


def agent(prompt: str, ctx: TrialContext) -> str:
    if prompt == "crash-once" and FLAKY["calls"] == 0:
        FLAKY["calls"] += 1
        raise RuntimeError("transient crash")
    return f"{prompt} answer {ctx.trial_index % 3}"


def make_suite() -> Suite:
    return Suite(
        id="s",
        kind="capability",
        trials=3,
        harness=agent,
        tasks=[
            Task(id="a", input="alpha", graders=[graders.contains("answer 1")]),
            Task(id="b", input="crash-once", graders=[graders.contains("answer")]),
        ],
    )


def test_resume_runs_only_what_is_missing_and_reports_the_whole_run(tmp_path: Path) -> None:
    FLAKY["calls"] = 0
    db = tmp_path / "s.db"
    with Store(f"sqlite:///{db}") as store:
        first = run_sync(make_suite(), store=store, concurrency=1)
        assert first.summary.errors == 1
        with sqlite3.connect(db) as conn:
            conn.execute("delete from trials where task_id = 'a' and idx = 2")
            conn.execute("delete from scores where task_id = 'a' and trial_idx = 2")
        ran: list[int] = []

        suite = make_suite()
        original = suite.harness

        def counting(prompt: str, ctx: TrialContext) -> str:
            ran.append(ctx.trial_index)
            return original(prompt, ctx)  # type: ignore[misc, operator, no-any-return]

        suite.harness = counting
        resumed = run_sync(suite, store=store, resume=first.run.id)
        assert ran == [2]  # only the deleted trial
        assert resumed.run.id == first.run.id
        assert resumed.summary.trials == 6
        assert resumed.summary.errors == 1  # the error stays without --retry-errors
        assert resumed.run.config["resumed"] == 1

        ran.clear()
        retried = run_sync(suite, store=store, resume=first.run.id, retry_errors=True)
        assert ran == [0]  # task b's errored trial 0
        assert retried.summary.errors == 0
        assert retried.summary.trials == 6
        assert len(stored_verdicts(store, first.run.id)) == 6
        assert retried.run.status == "completed"


def test_resume_refuses_another_suite(tmp_path: Path) -> None:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        first = run_sync(make_suite(), store=store)
        other = Suite(id="other", harness=agent, tasks=[Task(id="a", input="x")])
        with pytest.raises(SuiteError, match="ran suite 's', not 'other'"):
            run_sync(other, store=store, resume=first.run.id)
        fewer = Suite(id="s", harness=agent, tasks=[Task(id="a", input="alpha")])
        with pytest.raises(SuiteError, match="has tasks the suite no longer has: b"):
            run_sync(fewer, store=store, resume=first.run.id)


SLOW = """
import time
from trialkit import Suite, Task, TrialContext, graders

def agent(prompt: str, ctx: TrialContext) -> str:
    time.sleep(0.02)
    return "yes" if (len(prompt) + ctx.trial_index) % 4 else "no"

suite = Suite(id="slow", kind="regression", trials=10, harness=agent, tasks=[
    Task(id=f"task-{i:02d}", input="q" * i, graders=[graders.contains("yes")]) for i in range(30)
])
"""


def trialkit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trialkit", "run", "slow.py", "--no-progress", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TRIALKIT_STORE": str(cwd / "store.db")},
    )


def stored_trials(db: Path, name: str) -> int:
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute(
                "select count(*) from trials join runs on runs.id = trials.run_id "
                "where runs.name = ?",
                (name,),
            ).fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0])


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what differs between runs of the same recordings: ids and times."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: clean(v)
                for k, v in value.items()
                if k not in {"duration_s", "latency_p50_s", "latency_p95_s", "started_at", "wall_s"}
            }
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return clean({"summary": report["summary"], "tasks": report["tasks"]})


@pytest.mark.e2e
def test_a_run_killed_with_sigkill_resumes_to_the_same_report(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    whole = trialkit(tmp_path, "--json", "whole.json", "--concurrency", "4")
    assert whole.returncode == 1, whole.stderr  # the regression suite has failing tasks

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trialkit",
            "run",
            "slow.py",
            "--no-progress",
            "--concurrency",
            "4",
            "--name",
            "killed",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TRIALKIT_STORE": str(tmp_path / "store.db")},
    )
    db = tmp_path / "store.db"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and stored_trials(db, "killed") < 20:
        time.sleep(0.05)
    time.sleep(random.uniform(0, 0.3))  # a random moment in the middle of the run
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)

    with sqlite3.connect(tmp_path / "store.db") as conn:
        ((run_id, status),) = conn.execute(
            "select id, status from runs where name = 'killed'"
        ).fetchall()
        (stored,) = conn.execute(
            "select count(*) from trials where run_id = ?", (run_id,)
        ).fetchone()
        (scores_of_stored,) = conn.execute(
            "select count(*) from scores where run_id = ?", (run_id,)
        ).fetchone()
    assert status == "running"  # it never got to say otherwise
    assert 0 < stored < 300, stored
    assert scores_of_stored == stored  # one score per trial: no half-written trial

    resumed = trialkit(
        tmp_path, "--resume", "killed", "--json", "resumed.json", "--concurrency", "4"
    )
    assert resumed.returncode == 1, resumed.stderr
    with sqlite3.connect(tmp_path / "store.db") as conn:
        rows = conn.execute(
            "select task_id, idx, count(*) from trials where run_id = ? group by task_id, idx",
            (run_id,),
        ).fetchall()
    assert len(rows) == 300
    assert all(count == 1 for _, _, count in rows)
    whole_report = json.loads((tmp_path / "whole.json").read_text())
    resumed_report = json.loads((tmp_path / "resumed.json").read_text())
    assert resumed_report["run"]["id"] == run_id
    assert resumed_report["run"]["status"] == "completed"
    assert comparable(resumed_report) == comparable(whole_report)
