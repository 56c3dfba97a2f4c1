"""`--trials auto` with a baseline: a task stops once more trials cannot change its comparison
with the baseline's trials of it."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from trialkit import Runner, Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.run.adaptive import SETTLED, Adaptive, change, settled
from trialkit.store import Store
from trialkit.task import SuiteKind


def settled_by_sequences(base: tuple[int, int], passed: int, decided: int, left: int) -> bool:
    """`settled`, by playing out every sequence of pass, fail and error of the trials left."""
    now = change(base, passed, decided, 0.05)
    for outcomes in itertools.product("PFE", repeat=left):
        more_passed, more_failed = outcomes.count("P"), outcomes.count("F")
        final = change(base, passed + more_passed, decided + more_passed + more_failed, 0.05)
        if final != now:
            return False
    return True


@pytest.mark.parametrize("base", [(5, 5), (0, 5), (3, 6), (8, 8)])
def test_settled_is_every_outcome_of_the_trials_left(base: tuple[int, int]) -> None:
    for decided in range(0, 6):
        for passed in range(decided + 1):
            for left in range(0, 5):
                assert settled(base, passed, decided, left, 0.05) == settled_by_sequences(
                    base, passed, decided, left
                ), (base, passed, decided, left)


def test_change_is_the_direction_of_a_significant_fisher_test() -> None:
    assert change((5, 5), 0, 5, 0.05) == -1  # p = 1/126 * 2
    assert change((0, 5), 5, 5, 0.05) == 1
    assert change((5, 5), 4, 5, 0.05) == 0
    assert change((5, 5), 0, 0, 0.05) == 0  # nothing decided: nothing to compare


def test_the_policy_stops_a_settled_task_only_with_its_baseline_and_min_trials() -> None:
    policy = Adaptive(precision=0.01, min_trials=3, baseline={"t": (8, 8)})
    capability = SuiteKind.CAPABILITY
    # 0/6 against 8/8 is worse whatever 2 more trials give.
    reason = policy.stop_reason(capability, 0, 6, 0, cap=8, task_id="t")
    assert reason == f"{SETTLED} (8/8 there, 0/6 here)"
    assert policy.stop_reason(capability, 0, 2, 0, cap=8, task_id="t") is None  # min_trials
    assert policy.stop_reason(capability, 0, 6, 0, cap=8, task_id="other") is None
    assert policy.stop_reason(capability, 1, 3, 0, cap=8, task_id="t") is None  # could go back
    with pytest.raises(ValueError, match="alpha must be within"):
        Adaptive(alpha=1.0)


def suite() -> Suite:
    return Suite(
        id="s",
        kind="capability",
        trials=10,
        harness=lambda prompt: "ok" if prompt != "broke" else "no",
        tasks=[
            Task(id=name, input=name, graders=[graders.contains("ok")])
            for name in ("same", "broke", "new")
        ],
    )


def test_a_run_stops_tasks_whose_comparison_is_settled() -> None:
    policy = Adaptive(precision=0.01, baseline={"same": (10, 10), "broke": (10, 10)})
    report = run_sync(suite(), adaptive=policy, concurrency=1)
    stopped = report.run.config["adaptive"]["stopped"]
    assert report.run.config["adaptive"]["baseline"] == {"same": [10, 10], "broke": [10, 10]}
    # broke: 0/4 against 10/10 stays worse even if the 6 left all passed.
    assert report.task("broke").trials < 10
    assert stopped["broke"].startswith(SETTLED)
    # same: passes every trial; it stops once even all fails left could not make it worse.
    assert report.task("same").trials < 10
    assert stopped["same"].startswith(SETTLED)
    for task in ("same", "broke"):
        t = report.task(task)
        assert settled((10, 10), t.passed, t.trials, 10 - t.trials, 0.05)
        assert not settled((10, 10), t.passed - (task == "same"), t.trials - 1, 11 - t.trials, 0.05)
    assert report.task("new").trials == 10  # not in the baseline: its cap
    assert stopped["new"] == "it reached the most trials allowed (10)"


AUTO = ["run", "suite.py", "--no-progress", "--trials", "auto", "--precision", "0.01"]
AUTO += ["--concurrency", "1"]  # one trial at a time: each finished trial can stop the task


def test_the_cli_passes_the_baseline_to_trials_auto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRIALKIT_STORE", str(tmp_path / "store.db"))
    (tmp_path / "suite.py").write_text(
        "from trialkit import Suite, Task, graders\n"
        "suite = Suite(id='s', kind='capability', trials=10, harness=lambda p: 'ok', tasks=[\n"
        "    Task(id='same', input='x', graders=[graders.contains('ok')])])\n"
    )
    base = CliRunner().invoke(cli, ["run", "suite.py", "--no-progress", "--json", "base.json"])
    assert base.exit_code == 0, base.output
    result = CliRunner().invoke(
        cli,
        [*AUTO, "--baseline", "base.json", "--json", "r.json"],
    )
    assert result.exit_code == 0, result.output
    (task,) = json.loads((tmp_path / "r.json").read_text())["tasks"]
    assert task["stopped"].startswith(SETTLED)
    assert task["trials"] < 10
    without = CliRunner().invoke(
        cli,
        [*AUTO, "--json", "r.json"],
    )
    assert without.exit_code == 0
    (task,) = json.loads((tmp_path / "r.json").read_text())["tasks"]
    assert task["trials"] == 10


def test_a_resumed_run_keeps_the_baseline_rule(tmp_path: Path) -> None:
    policy = Adaptive(precision=0.01, baseline={"same": (10, 10), "broke": (10, 10)}, alpha=0.01)
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        first = run_sync(suite(), store=store, adaptive=policy, concurrency=1)
        runner = Runner(store=store, concurrency=1)
        again = anyio.run(functools.partial(runner.run, suite(), resume=first.run.id))
    assert runner.adaptive is not None
    assert runner.adaptive.baseline == {"same": (10, 10), "broke": (10, 10)}
    assert runner.adaptive.alpha == 0.01
    assert again.task("broke").trials == first.task("broke").trials  # nothing more to run
