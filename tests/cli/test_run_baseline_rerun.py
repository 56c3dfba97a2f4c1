"""`trialkit run --baseline FILE|RUN` (the CI loop without a shared store) and `--rerun RUN`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit.cli.main import cli
from trialkit.store import Store

SUITE = """
import os
from trialkit import Suite, Task, graders

def listed(name):
    return set(filter(None, os.environ.get(name, "").split(",")))


def agent(prompt):  # reads the variables at each call: the tests change them between runs
    if prompt in listed("CRASH"):
        raise RuntimeError("the agent crashed")
    return "no" if prompt in listed("BROKEN") else prompt


suite = Suite(
    id="loop",
    kind="{kind}",
    trials=2,
    harness=agent,
    tasks=[
        Task(id=f"t{{i}}", input=f"t{{i}}", graders=[graders.contains(f"t{{i}}")])
        for i in range(12)
    ],
)
"""


def write_suite(folder: Path, kind: str = "capability") -> Path:
    path = folder / "evals.py"
    path.write_text(SUITE.format(kind=kind))
    return path


def run(
    monkeypatch: pytest.MonkeyPatch, *args: str, broken: str = "", crash: str = ""
) -> tuple[int, str, str]:
    monkeypatch.setenv("BROKEN", broken)
    monkeypatch.setenv("CRASH", crash)
    result = CliRunner().invoke(cli, ["run", *args, "--no-progress"])
    return result.exit_code, result.stdout, result.stderr


def runs_in(store: Path) -> list[dict[str, object]]:
    with Store(f"sqlite:///{store}") as opened:
        return [{"id": r.id, "tasks": r.tasks, "trials": r.trials} for r in opened.list_runs()]


@pytest.fixture
def main_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The base branch's run, in a store of its own, and its JSON report: the CI artifact."""
    suite = write_suite(tmp_path)
    report = tmp_path / "main.json"
    code, _, err = run(
        monkeypatch, str(suite), "--store", str(tmp_path / "main.db"), "--json", str(report)
    )
    assert code == 0, err
    return report


def test_a_worse_run_fails_the_gate_only_with_fail_on_regression(
    tmp_path: Path, main_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = str(tmp_path / "evals.py")
    pr_store = str(tmp_path / "pr.db")  # another store: only the report file is shared
    broken = "t1,t2,t3,t4,t5,t6,t7"
    code, out, err = run(
        monkeypatch, suite, "--store", pr_store, "--baseline", str(main_report), broken=broken
    )
    # a capability suite: failing tasks do not fail the gate by themselves
    assert code == 0, err
    assert "New failures in B" in out and "t1, t2, t3, t4, t5, t6, t7" in out
    assert "significant at 95%" in out
    baseline_id = json.loads(main_report.read_text())["run"]["id"]
    assert f"A is the baseline {baseline_id}; B is this run." in out
    assert f"regression: significantly worse than the baseline {baseline_id}" in err

    code, out, err = run(
        monkeypatch,
        suite,
        "--store",
        pr_store,
        "--baseline",
        str(main_report),
        "--fail-on-regression",
        "--quiet",
        broken=broken,
    )
    assert code == 1
    assert "B is worse than A on these tasks" in out
    assert "regression: significantly worse" in err


def test_a_run_no_worse_than_its_baseline_passes(
    tmp_path: Path, main_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(
        monkeypatch,
        str(tmp_path / "evals.py"),
        "--store",
        str(tmp_path / "pr.db"),
        "--baseline",
        str(main_report),
        "--fail-on-regression",
        broken="t1",  # one task of two trials: too few trials to call it a regression
    )
    assert code == 0, err
    assert "regression" not in err
    assert "No significant change from A to B on these tasks" in out


def test_the_baseline_may_be_a_stored_run(
    tmp_path: Path, main_report: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main_id = json.loads(main_report.read_text())["run"]["id"]
    code, out, err = run(
        monkeypatch,
        str(tmp_path / "evals.py"),
        "--store",
        str(tmp_path / "main.db"),
        "--baseline",
        main_id[:12],  # a unique prefix, like every RUN argument
        "--fail-on-regression",
        broken="t0,t2,t4,t6,t8,t10",
    )
    assert code == 1, err
    assert f"A is the baseline {main_id}" in out


@pytest.mark.parametrize(
    ("baseline", "message"),
    [
        ("missing.json", "--baseline missing.json: no such report file"),
        ("bad.json", "bad.json: not a trialkit report"),
        ("other.json", "a run of suite 'other', not 'loop'"),
        ("nope", "--baseline nope: no run matches 'nope'"),
    ],
)
def test_a_baseline_that_cannot_be_used_is_exit_2_before_anything_runs(
    tmp_path: Path, main_report: Path, monkeypatch: pytest.MonkeyPatch, baseline: str, message: str
) -> None:
    (tmp_path / "bad.json").write_text('{"a": 1}')
    other = json.loads(main_report.read_text())
    other["suite"]["id"] = "other"
    (tmp_path / "other.json").write_text(json.dumps(other))
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "pr.db"
    code, _, err = run(monkeypatch, "evals.py", "--store", str(store), "--baseline", baseline)
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not store.exists() or runs_in(store) == []


def test_fail_on_regression_needs_a_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(monkeypatch, str(write_suite(tmp_path)), "--fail-on-regression")
    assert (code, err.strip()) == (2, "error: --fail-on-regression needs --baseline FILE|RUN")


def test_rerun_runs_only_what_did_not_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = str(write_suite(tmp_path, kind="regression"))
    store = str(tmp_path / "s.db")
    code, _, _ = run(
        monkeypatch, suite, "--store", store, "--name", "nightly", broken="t1,t2", crash="t3"
    )
    assert code == 3  # an errored trial: exit 3 before the failed gate
    first = runs_in(Path(store))[0]["id"]

    for only, expected in (
        ("failed", ["t1", "t2"]),
        ("errored", ["t3"]),
        ("not-passed", ["t1", "t2", "t3"]),
    ):
        code, _, err = run(
            monkeypatch, suite, "--store", store, "--rerun", "nightly", "--only", only
        )
        assert code == 0, err  # the agent is fixed now: every rerun task passes
        with Store(f"sqlite:///{store}") as opened:
            newest = opened.list_runs()[0]
            report = opened.load_report(newest.id)
            config = report.run.config
        assert [t.id for t in report.tasks] == expected
        assert report.summary.trials == 2 * len(expected)  # every trial of each task again
        assert (config["rerun_of"], config["rerun_only"]) == (first, only)

    # the default is not-passed, like pytest's --lf; --task narrows it further
    code, _, err = run(monkeypatch, suite, "--store", store, "--rerun", first, "--task", "t[23]")
    assert code == 0, err
    with Store(f"sqlite:///{store}") as opened:
        newest = opened.list_runs()[0]
        assert [t.id for t in opened.load_report(newest.id).tasks] == ["t2", "t3"]


def test_rerun_refuses_what_it_cannot_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = str(write_suite(tmp_path, kind="regression"))
    store = str(tmp_path / "s.db")
    assert run(monkeypatch, suite, "--store", store, "--name", "green")[0] == 0
    stored = len(runs_in(Path(store)))

    code, _, err = run(monkeypatch, suite, "--store", store, "--rerun", "green")
    assert (code, err.strip()) == (
        2,
        f"error: run {runs_in(Path(store))[0]['id']!r} has no not-passed tasks: nothing to rerun",
    )
    code, _, err = run(monkeypatch, suite, "--store", store, "--only", "failed")
    assert (code, err.strip()) == (2, "error: --only goes with --rerun RUN")
    code, _, err = run(
        monkeypatch, suite, "--store", store, "--rerun", "green", "--resume", "green"
    )
    assert code == 2 and "--rerun and --resume do not go together" in err
    other = tmp_path / "other.py"
    other.write_text(SUITE.format(kind="regression").replace('id="loop"', 'id="other"'))
    code, _, err = run(monkeypatch, str(other), "--store", store, "--rerun", "green")
    assert code == 2 and "ran suite 'loop', not 'other'" in err
    assert len(runs_in(Path(store))) == stored  # nothing was stored by a refused rerun


def test_run_writes_the_trials_as_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import csv

    out = tmp_path / "reports" / "trials.csv"
    code, _, err = run(
        monkeypatch,
        str(write_suite(tmp_path)),
        "--store",
        str(tmp_path / "s.db"),
        "--csv",
        str(out),
        crash="t3",
    )
    assert code == 3, err
    with out.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 24  # 12 tasks x 2 trials
    crashed = [r for r in rows if r["task"] == "t3"]
    assert {r["verdict"] for r in crashed} == {"error"}
    assert all("the agent crashed" in r["error"] for r in crashed)
    assert {r["score:contains('t0')"] for r in rows if r["task"] == "t0"} == {"1.0"}
