"""The JSON report written from the store as a stream (`write_json_report`, `trialkit report
--format json`, `trialkit run --json`) is byte for byte the report `render_json` makes of the
whole report, whatever the run holds, and its memory does not grow with the run's tasks."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import tracemalloc
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.store._samples import make_sample, make_trial
from trialkit import Suite, Task, graders, run_sync
from trialkit.reports import load_json_report
from trialkit.reports.json import encode, write_json_report
from trialkit.score import Score, Verdict
from trialkit.secrets import redact
from trialkit.store import Store
from trialkit.store.urls import sqlite_url


def _streamed(store: Store, run_id: str) -> str:
    with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
        write_json_report(store, run_id, out)
        out.seek(0)
        return out.read()


def _whole(store: Store, run_id: str) -> str:
    """The report as `trialkit report --format json` wrote it before it was streamed."""
    return redact(store.load_report(run_id).to_json())


def _finish(store: Store, sample: Any) -> None:
    sample.run.status = "completed"
    sample.run.finished_at = sample.run.started_at + timedelta(seconds=5)
    store.finish_run(sample.run)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Store(sqlite_url(tmp_path / "store.db")) as opened:
        yield opened


@pytest.mark.parametrize("finished", [False, True], ids=["computed", "kept"])
def test_the_stream_is_the_whole_report_byte_for_byte(store: Store, finished: bool) -> None:
    sample = make_sample("run-sample")
    # A task of more than 20 trials (it lists its first 20 that did not pass), a score whose
    # metadata holds a number JSON has not, text JSON escapes (quotes, backslashes, controls)
    # and text it does not (other scripts, emoji, a line separator).
    sample.plans[2].trials = 30
    sample.trials += [
        make_trial(
            "run-sample",
            "tools",
            i,
            verdict=Verdict.FAIL if i % 3 else Verdict.PASS,
            output=f'"odd" \\ \x01\t\n München 東京 \U0001f600 \u2028 output {i}',
            scores=[Score(name="s", value=0.5, verdict=Verdict.PASS, metadata={"x": math.inf})],
        )
        for i in range(1, 30)
    ]
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    if finished:
        _finish(store, sample)
    streamed = _streamed(store, "run-sample")
    assert streamed == _whole(store, "run-sample")
    report = load_json_report(streamed)  # the documented format, read back
    assert [t.id for t in report.tasks] == ["france", "json", "tools", "never-ran"]
    data = json.loads(streamed)
    assert data["gate"]["exit_code"] == 3 and "france" in " ".join(data["gate"]["reasons"])
    assert len(data["tasks"][2]["results"]) == 20


def test_a_run_of_capability_tasks_and_a_passing_regression_run(store: Store) -> None:
    for kind in ("capability", "regression"):
        suite = Suite(
            id=f"suite-{kind}",
            kind=kind,
            trials=3,
            harness=lambda prompt: prompt,
            tasks=[
                Task(id=f"t{i}", input="yes" if i % 2 else "no", graders=[graders.contains("yes")])
                for i in range(7)
            ],
        )
        run_id = run_sync(suite, store=store).run.id
        assert _streamed(store, run_id) == _whole(store, run_id)


def test_a_listed_trial_gone_bad_is_written_from_the_trials(store: Store, tmp_path: Path) -> None:
    sample = make_sample("run-bad")
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    _finish(store, sample)
    engine = create_engine(sqlite_url(tmp_path / "store.db"), poolclass=NullPool)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE trials SET scores = '[{' WHERE task_id = 'france' AND idx = 0"),
        )
    engine.dispose()
    streamed = _streamed(store, "run-bad")
    assert streamed == _whole(store, "run-bad")
    france = json.loads(streamed)["tasks"][0]
    assert france["errors"] == 1  # counted as the error it is now, not as the kept pass
    assert france["results"][0]["error"]["message"].startswith("stored row could not be read")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, depth=st.integers(0, 3))
def test_encode_writes_what_json_dumps_writes(value: Any, depth: int) -> None:
    indent = "  " * depth
    expected = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    assert encode(value) == expected
    assert encode(value, indent) == expected.replace("\n", "\n" + indent)


def test_encode_refuses_what_json_refuses() -> None:
    for value in (math.nan, [math.inf], {"x": -math.inf}):
        with pytest.raises(ValueError, match="not JSON compliant"):
            encode(value)
        assert "null" in encode(value, finite=True)
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode({"x": object()})


def test_memory_stays_flat_as_tasks_grow(tmp_path: Path) -> None:
    """The peak memory of writing the report barely grows from 600 to 2,400 tasks (what is
    held is a batch of tasks, never the report)."""
    peaks = []
    for tasks in (600, 2400):
        with Store(sqlite_url(tmp_path / f"{tasks}.db")) as store:
            suite = Suite(
                id="flat",
                kind="regression",
                trials=1,
                harness=lambda prompt: "yes",
                tasks=[
                    Task(id=f"task-{i:05d}", input="q", graders=[graders.contains("yes")])
                    for i in range(tasks)
                ],
            )
            run_id = run_sync(suite, store=store).run.id
            _streamed(store, run_id)  # caches warmed, modules imported
            with tempfile.TemporaryFile("w+", encoding="utf-8") as out:
                tracemalloc.start()
                try:
                    write_json_report(store, run_id, out)
                    peaks.append(tracemalloc.get_traced_memory()[1])
                finally:
                    tracemalloc.stop()
    small, large = peaks
    assert large / small < 1.5, peaks  # the whole report held would be about 4 times as much


SUITE = """
from trialkit import Suite, Task, graders

suite = Suite(id="cli", kind="regression", trials=2, harness=lambda prompt: prompt, tasks=[
    Task(id=f"t{i}", input="yes" if i != 3 else "no", graders=[graders.contains("yes")])
    for i in range(6)
])
"""


def test_run_json_and_report_json_are_the_same_text(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    env = {**os.environ, "TRIALKIT_STORE": str(tmp_path / "store.db"), "NO_COLOR": "1"}

    def trialkit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trialkit", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    ran = trialkit("run", "suite.py", "-q", "--name", "cli", "--json", "out/run.json")
    assert ran.returncode == 1, ran.stderr  # t3 fails its regression gate
    written = (tmp_path / "out" / "run.json").read_text(encoding="utf-8")
    reported = trialkit("report", "cli", "--format", "json")
    assert reported.returncode == 0, reported.stderr
    assert reported.stdout == written
    to_file = trialkit("report", "cli", "--format", "json", "-o", "again.json")
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert (tmp_path / "again.json").read_text(encoding="utf-8") == written
    assert not list(tmp_path.glob(".again.json.*"))  # written whole, then put in place
    with Store(sqlite_url(tmp_path / "store.db")) as store:
        assert written == _whole(store, store.resolve_run("cli"))
    data = json.loads(written)
    assert data["gate"] == {
        "verdict": "failed",
        "exit_code": 1,
        "reasons": ["regression tasks did not pass: t3"],
        "min_pass_rate": None,
        "fail_on_error": 0.0,
    }
