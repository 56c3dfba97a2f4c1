"""A pytest-xdist worker that dies in the middle of a task (`os._exit`, SIGKILL) does not make
that task read as a pass: the trials it never finished are errors in the stored run, in the
terminal summary and in every report, saying the worker crashed; a suite only the dead worker
ran is ended too. Without a store, the crashed task's missing trials are errors in the
summary and a notice says what was lost. An ordinary test session whose worker crashes is left
alone (no store is made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.pytest_plugin.conftest import default_store, stored_runs
from trialkit.cli.main import cli

MAIN = """
import os
from trialkit import Suite, Task, graders


def agent(prompt, ctx):
    if prompt == "boom" and ctx.trial_index == 1:
        os._exit(1)
    return "yes"


main = Suite(id="main", kind="regression", trials=2, harness=agent, tasks=[
    Task(id=f"t{i}", input="boom" if i == 2 else "ok", graders=[graders.contains("yes")])
    for i in range(5)
])
"""

SOLO = """
import os
import signal
from trialkit import Suite, Task, graders


def agent(prompt, ctx):
    os.kill(os.getpid(), signal.SIGKILL)


solo = Suite(id="solo", kind="capability", trials=3, harness=agent, tasks=[
    Task(id="killed", input="x", graders=[graders.contains("yes")]),
])
"""

MARKED = """
import os
import pytest


@pytest.mark.trialkit(trials=2)
def test_dies(trialkit_trial):
    if trialkit_trial.trial_index == 1:
        os._exit(3)


@pytest.mark.trialkit(trials=2)
def test_fine():
    assert True
"""


def _crashed(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines)


def test_a_crashed_worker_leaves_its_unfinished_trials_as_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(eval_main=MAIN, eval_solo=SOLO, test_marked=MARKED)
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2")
    out = _crashed(result)
    assert "crashed while running 'eval_main.py::main::t2'" in out
    runs = stored_runs(default_store(pytester))
    assert set(runs) == {"main", "solo", "test_marked"}
    for report in runs.values():
        assert report.run.status == "completed", report.run
    main = runs["main"]
    boom = main.task("t2")
    assert (boom.trials, boom.verdict.value) == (2, "error")
    assert boom.errors >= 1 and boom.passed + boom.errors == 2
    unfinished = [r for r in boom.results if r.error is not None]
    assert unfinished and all(r.error.type == "TrialNotFinished" for r in unfinished)
    assert all("the pytest worker" in r.error.message for r in unfinished)
    assert all("crashed" in r.error.message for r in unfinished)
    assert [(t.id, t.passed) for t in main.tasks if t.id != "t2"] == [
        ("t0", 2),
        ("t1", 2),
        ("t3", 2),
        ("t4", 2),
    ]
    assert main.summary.passed_tasks == 4 and main.summary.errors == boom.errors
    # A suite that only the killed worker ran: found in the store, ended, every trial an error.
    killed = runs["solo"].task("killed")
    assert (killed.trials, killed.errors, killed.verdict.value) == (3, 3, "error")
    dies = runs["test_marked"].task("test_dies")
    assert (dies.trials, dies.verdict.value) == (2, "error")
    assert runs["test_marked"].task("test_fine").passed == 2
    # The terminal summary says what the store says.
    assert "4/5 tasks passed" in out and "5/5 tasks passed" not in out
    assert "0/1 tasks passed" in out
    # And so does `trialkit report`, in every format.
    store = str(default_store(pytester))
    for fmt in ("table", "md", "json", "junit", "html"):
        shown = CliRunner().invoke(cli, ["report", main.run.id, "--format", fmt, "--store", store])
        assert shown.exit_code == 0, shown.output
        assert "crashed" in shown.stdout, fmt
    shown = CliRunner().invoke(cli, ["report", main.run.id, "--format", "json", "--store", store])
    data = json.loads(shown.stdout)
    assert data["summary"]["errors"] == boom.errors
    assert data["gate"]["exit_code"] == 3


def test_without_a_store_the_crashed_task_is_an_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(eval_main=MAIN)
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2", "--trialkit-store", "none")
    out = _crashed(result)
    assert "5/5 tasks passed" not in out
    assert "tasks passed" in out
    assert "the trials it ran are lost (nothing is stored: --trialkit-store none)" in out
    assert not default_store(pytester).exists()


def test_an_ordinary_session_with_a_crashed_worker_is_left_alone(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_plain="""
import os

def test_ok():
    assert True

def test_dies():
    os._exit(1)
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, failed=1)
    assert "= trialkit =" not in _crashed(result)  # no trialkit section in the summary
    assert not (Path(pytester.path) / ".trialkit").exists()
