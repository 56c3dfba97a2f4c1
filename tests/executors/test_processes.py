"""`Runner(workers=N)`: trials in worker processes, with the same results as in one process."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.fakes.provider_server import ProviderServer
from trialkit import Runner, Suite, Task
from trialkit._errors import RunFailed
from trialkit.executors import WorkerError
from trialkit.loaders.target import load_target
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.report import Report
from trialkit.run.adaptive import Adaptive
from trialkit.store import Store
from trialkit.task import SuiteError

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

SUITE = """
import os, signal, time
from trialkit import Suite, Task, TrialContext, graders

def agent(prompt: str, ctx: TrialContext) -> str:
    print("noise on stdout", flush=True)  # must not corrupt the worker's channel
    if prompt == "crash":
        raise RuntimeError("agent crashed")
    if prompt == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if prompt == "slow":
        time.sleep(30)
    if prompt == "flaky":
        return f"{'yes' if ctx.trial_index % 2 == 0 else 'no'} pid={os.getpid()}"
    return f"yes\\nmultiline pid={os.getpid()}"

def tasks(*names):
    return [Task(id=n, input=n, graders=[graders.contains("yes")]) for n in names]

mixed = Suite(id="mixed", kind="capability", trials=4, harness=agent,
              tasks=tasks("good", "flaky", "crash", "other"))
regression = Suite(id="regression", kind="regression", trials=3, harness=agent,
                   tasks=tasks("good", "flaky", "other"))
killer = Suite(id="killer", kind="capability", trials=1, harness=agent,
               tasks=[*tasks("die"), *tasks(*[f"ok{i}" for i in range(7)])])
always_dies = Suite(id="always-dies", kind="capability", trials=20, harness=agent,
                    tasks=tasks("die"))
slow = Suite(id="slow", kind="capability", trials=4, harness=agent, tasks=tasks("slow"))

def _judge_says(request, trial):
    graded = request.messages[-1].content.split("<graded_output>", 1)[1]
    return '{"reasoning": "", "score": %d}' % ("yes" in graded)

from trialkit.models import ScriptedModel
says_yes = graders.judge("Says yes.", model=ScriptedModel("judge", _judge_says),
                         must_fail=["no"], must_pass=["yes"])
judged = Suite(id="judged", kind="capability", trials=4, harness=agent,
               tasks=[Task(id=n, input=n, graders=[says_yes]) for n in ("good", "other", "flaky")])
"""

MODEL_SUITE = """
id: chat
kind: capability
trials: 3
model: openai/gpt-test
tasks:
  - {id: france, input: "What is the capital of France?"}
  - {id: spain, input: "What is the capital of Spain?"}
"""


MIXED_TALLY = [
    ("good", "pass", 4, 4, 0, 0),
    ("flaky", "pass", 4, 2, 2, 0),
    ("crash", "error", 4, 0, 0, 4),
    ("other", "pass", 4, 4, 0, 0),
]
"""The `mixed` suite's report, wherever its trials run: (task, verdict, trials, passed,
failed, errors)."""
MIXED_STORED = [(task, i, 1) for task in ("crash", "flaky", "good", "other") for i in range(4)]
"""Its trials in the store: each (task, index) once."""


@pytest.fixture
def suite_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "suites.py"
    path.write_text(SUITE)
    return path


def run(suite: Suite, resume: str | None = None, **options: Any) -> tuple[Report, Runner]:
    runner = Runner(**options)

    async def main() -> Report:
        with anyio.fail_after(120):  # never a hang
            return await runner.run(suite, resume=resume)

    return anyio.run(main), runner


def tally(report: Report) -> list[tuple[str, str, int, int, int, int]]:
    return [(t.id, t.verdict, t.trials, t.passed, t.failed, t.errors) for t in report.tasks]


def stored(db: Path) -> list[tuple[str, int, int]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select task_id, idx, count(*) from trials group by task_id, idx")
        return sorted(rows.fetchall())


def worker_processes() -> list[int]:
    """Worker processes whose parent is this process (from /proc: psutil is optional)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"trialkit.executors.worker" in command:
            found.append(int(entry.name))
    return found


def test_workers_store_each_trial_once_and_report_like_one_process(
    suite_file: Path, tmp_path: Path
) -> None:
    suite = load_target(f"{suite_file}:mixed")
    alone, _ = run(suite, store=str(tmp_path / "one.db"), concurrency=4)
    spread, _ = run(suite, store=str(tmp_path / "two.db"), concurrency=4, workers=2)

    assert tally(spread) == tally(alone) == MIXED_TALLY
    assert stored(tmp_path / "two.db") == MIXED_STORED
    assert spread.run.config["workers"] == 2
    outputs = [r.output or "" for t in spread.tasks for r in t.results if r.output]
    pids = {line.rsplit("pid=", 1)[1] for line in outputs}
    assert len(pids) == 2  # both workers ran trials...
    assert str(os.getpid()) not in pids  # ...and none ran here
    assert any("\n" in output for output in outputs)  # newlines survive the channel
    assert worker_processes() == []


def test_judge_controls_checked_in_each_worker_count_in_the_run(suite_file: Path) -> None:
    suite = load_target(f"{suite_file}:judged")
    alone, _ = run(suite, concurrency=4)
    spread, _ = run(suite, concurrency=4, workers=2)

    assert tally(spread) == tally(alone)
    assert alone.run.config["judge_controls"]["calls"] == 2
    pids = {(r.output or "").rsplit("pid=", 1)[1] for t in spread.tasks for r in t.results}
    controls = spread.run.config["judge_controls"]
    assert controls["calls"] == 2 * len(pids)  # each worker checks its judge once
    one_check = alone.run.config["judge_controls"]["usage"]["input_tokens"]
    assert controls["usage"]["input_tokens"] == one_check * len(pids)
    trials_only = sum(t.grader_usage.input_tokens for t in spread.tasks)
    assert (
        spread.summary.grader_usage.input_tokens == trials_only + controls["usage"]["input_tokens"]
    )


def test_adaptive_trials_with_workers(suite_file: Path) -> None:
    suite = load_target(f"{suite_file}:regression")
    policy = Adaptive(max_trials=6)
    alone, _ = run(suite, adaptive=policy, concurrency=3)
    spread, _ = run(suite, adaptive=policy, concurrency=3, workers=2)
    assert [(t.id, t.verdict) for t in spread.tasks] == [
        ("good", "pass"),
        ("flaky", "fail"),
        ("other", "pass"),
    ]
    assert [(t.id, t.verdict) for t in spread.tasks] == [(t.id, t.verdict) for t in alone.tasks]
    assert all(t.stopped for t in spread.tasks)
    assert all(t.trials <= 6 for t in spread.tasks)


def test_resume_with_workers(suite_file: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    suite = load_target(f"{suite_file}:mixed")
    first, _ = run(suite, store=str(db), concurrency=4, workers=2)
    with sqlite3.connect(db) as conn:
        conn.execute("delete from trials where task_id = 'good' and idx >= 2")
        conn.execute("delete from scores where task_id = 'good' and trial_idx >= 2")
    resumed, runner = run(suite, resume=first.run.id, store=str(db), concurrency=4, workers=2)
    assert runner.finished == 2
    assert tally(resumed) == tally(first)
    assert len(stored(db)) == 16


def test_a_worker_killed_mid_run_errors_its_trial_and_the_run_finishes(
    suite_file: Path, tmp_path: Path
) -> None:
    suite = load_target(f"{suite_file}:killer")
    db = tmp_path / "s.db"
    # Two workers, two at a time: each worker holds one trial, so only "die" is lost.
    report, _ = run(suite, store=str(db), concurrency=2, workers=2)

    die = next(t for t in report.tasks if t.id == "die")
    assert (die.verdict, die.errors) == ("error", 1)
    with sqlite3.connect(db) as conn:
        (error,) = conn.execute("select error from trials where task_id = 'die'").fetchone()
    assert "WorkerDied" in error
    assert "killed by SIGKILL (exit code -9)" in error
    assert "noise on stdout" in error  # the tail of the worker's stderr
    assert [t.verdict for t in report.tasks if t.id != "die"] == ["pass"] * 7
    assert report.run.status == "completed"
    assert len(stored(db)) == 8
    assert worker_processes() == []


def test_workers_that_keep_dying_fail_the_run(suite_file: Path, tmp_path: Path) -> None:
    suite = load_target(f"{suite_file}:always_dies")
    runner = Runner(store=str(tmp_path / "s.db"), concurrency=2, workers=2)

    async def main() -> None:
        with anyio.fail_after(120):
            await runner.run(suite)

    # The run could not finish (exit 4 of `trialkit run`), not a bad suite.
    with pytest.raises(RunFailed, match=r"worker processes died .*SIGKILL.*giving up") as raised:
        anyio.run(main)
    assert isinstance(raised.value.__cause__, WorkerError)
    assert runner.last_run is not None and runner.last_run.status == "interrupted"
    assert 0 < runner.finished < 20  # the lost trials are stored as errors
    assert raised.value.stored == runner.finished
    assert worker_processes() == []


def test_workers_that_keep_dying_mid_run_exit_4(suite_file: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from trialkit.cli.main import cli

    args = ["run", f"{suite_file}:always_dies", "--workers", "2", "--concurrency", "2"]
    result = CliRunner().invoke(cli, [*args, "--store", "s.db", "--no-progress"])
    assert result.exit_code == 4, result.stderr
    *noise, line = result.stderr.splitlines()
    assert set(noise) <= {"noise on stdout"}  # what the dying workers printed, no traceback
    assert line.startswith("error: 6 worker processes died")
    assert re.search(
        r"; \d+ finished trials are stored, `trialkit run .* --resume \S+` continues$", line
    )
    assert worker_processes() == []


def test_a_cancelled_run_leaves_no_worker_running(suite_file: Path) -> None:
    suite = load_target(f"{suite_file}:slow")
    runner = Runner(concurrency=4, workers=2)

    async def main() -> None:
        with anyio.move_on_after(3):
            await runner.run(suite)

    started = time.monotonic()
    anyio.run(main)
    assert time.monotonic() - started < 20  # SIGTERM stopped the sleeping agents' workers
    assert runner.last_run is not None and runner.last_run.status == "interrupted"
    assert worker_processes() == []


def test_record_with_workers_then_replay_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider_server: ProviderServer
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", provider_server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "chat.yaml").write_text(MODEL_SUITE)
    suite = load_target("chat.yaml")
    cassette_dir = tmp_path / "cassette"

    recorded, _ = run(
        suite, workers=2, concurrency=4, cassette=Cassette(cassette_dir, CacheMode.RECORD)
    )
    replayed, _ = run(suite, concurrency=4, cassette=Cassette(cassette_dir, CacheMode.REPLAY))

    assert recorded.summary.errors == 0 and recorded.summary.trials == 6
    assert tally(replayed) == tally(recorded)

    def outputs(report: Report) -> list[tuple[str, int, str | None]]:
        return sorted((t.id, r.trial, r.output) for t in report.tasks for r in t.results)

    assert outputs(replayed) == outputs(recorded)
    manifest = json.loads((cassette_dir / ".last-run.json").read_text())
    assert len(manifest["keys"]) == 2  # the workers' keys reached the run's manifest


def test_workers_need_a_suite_loaded_from_a_target(tmp_path: Path) -> None:
    suite = Suite(id="inline", harness=lambda p: p, tasks=[Task(id="a", input="x")])
    with pytest.raises(SuiteError, match=r"load the suite with `trialkit run TARGET`"):
        run(suite, workers=2, store=str(tmp_path / "s.db"))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        Runner(workers=0)
    with pytest.raises(ValueError, match="cannot be sent to worker processes"):
        Runner(workers=2, harness=lambda p: p)


def test_a_suite_that_does_not_load_in_the_workers_is_a_clear_error(
    suite_file: Path,
) -> None:
    suite = load_target(f"{suite_file}:mixed")
    suite_file.rename(suite_file.with_name("elsewhere.py"))
    store = Store("sqlite://")
    with pytest.raises(WorkerError, match=r"could not load the suite: .*no such file"):
        run(suite, workers=2, store=store)
    assert worker_processes() == []
    assert store.list_runs() == []  # the workers start before the run is stored


def test_the_cli_runs_trials_in_workers(suite_file: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "trialkit", "run", f"{suite_file}:mixed"]
    command += ["--workers", "2", "--concurrency", "4", "--json", "out.json", "--no-progress"]
    env = {**os.environ, "TRIALKIT_STORE": str(tmp_path / "store.db")}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr  # the "crash" task errors
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["summary"]["trials"] == 16
    assert [t["verdict"] for t in report["tasks"]] == ["pass", "pass", "error", "pass"]
    assert "noise on stdout" in done.stderr and "noise on stdout" not in done.stdout

    help_text = subprocess.run(
        [sys.executable, "-m", "trialkit", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--workers" in help_text and "latency-bound" in help_text


def test_workers_stop_when_the_parent_is_killed(suite_file: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "trialkit", "run", f"{suite_file}:slow", "--workers", "2"]
    env = {**os.environ, "TRIALKIT_STORE": str(tmp_path / "store.db")}
    parent = subprocess.Popen(
        [*command, "--no-progress"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(workers_of(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = workers_of(parent.pid)
        assert len(workers) == 2
        time.sleep(1)  # the agents are sleeping in the workers' threads now
    finally:
        parent.kill()
        parent.wait()
    # PR_SET_PDEATHSIG sends SIGTERM; a worker stuck in a blocking agent exits after its grace.
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def workers_of(parent: int) -> list[int]:
    """Worker processes started by process `parent`."""
    marker = f"--parent\0{parent}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if b"trialkit.executors.worker" in command and marker in command:
                found.append(int(entry.name))
    return found
