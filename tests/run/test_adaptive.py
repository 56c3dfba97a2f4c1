"""Adaptive trials: each task is sampled only while its verdict or estimate is undecided."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from trialkit import Runner, Suite, Task, TrialContext, graders, run_sync
from trialkit.run.adaptive import Adaptive, AdaptiveQueue
from trialkit.score import Verdict
from trialkit.store import Store
from trialkit.task import SuiteKind

REGRESSION, CAPABILITY = SuiteKind.REGRESSION, SuiteKind.CAPABILITY


def test_a_regression_task_stops_at_its_first_failure_or_its_cap() -> None:
    policy = Adaptive(precision=0.2)
    assert policy.stop_reason(REGRESSION, 3, 0, 0, cap=20) is None
    assert policy.stop_reason(REGRESSION, 3, 1, 0, cap=20) == (
        "a regression task fails at its first failed trial"
    )
    # the interval never stops a passing regression task: its verdict needs every trial
    assert policy.stop_reason(REGRESSION, 19, 0, 0, cap=20) is None
    assert policy.stop_reason(REGRESSION, 20, 0, 0, cap=20) == (
        "it reached the most trials allowed (20)"
    )
    # a capability task's verdict is known at its first pass, but not its pass rate
    assert policy.stop_reason(CAPABILITY, 1, 1, 0, cap=20) is None


def test_the_interval_width_and_the_cap_stop_a_capability_task() -> None:
    policy = Adaptive(precision=0.2)
    # 16 of 16: the Wilson interval is [0.806, 1], 0.194 wide; 15 of 15 is 0.204 wide.
    assert policy.stop_reason(CAPABILITY, 15, 0, 0, cap=20) is None
    assert policy.stop_reason(CAPABILITY, 16, 0, 0, cap=20) == (
        "the 95% interval is 0.19 wide (precision 0.2)"
    )
    assert policy.stop_reason(CAPABILITY, 5, 5, 9, cap=20) is None
    assert policy.stop_reason(CAPABILITY, 5, 5, 10, cap=20) == (
        "it reached the most trials allowed (20)"
    )
    assert Adaptive(precision=1.0, min_trials=2).stop_reason(CAPABILITY, 1, 0, 0, cap=5) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_trials": 0}, "max_trials"),
        ({"precision": 0}, "precision"),
        ({"precision": 1.5}, "precision"),
        ({"min_trials": 0}, "min_trials"),
    ],
)
def test_bad_policies_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Adaptive(**options)  # type: ignore[arg-type]


def test_the_queue_spreads_workers_and_waits_for_trials_in_flight() -> None:
    import anyio

    async def main() -> list[tuple[str, int]]:
        queue = AdaptiveQueue(
            Adaptive(max_trials=4),
            [("a", REGRESSION, 9, "a"), ("b", REGRESSION, 9, "b")],
            workers=2,
        )
        first = await queue.next()
        second = await queue.next()
        assert (first, second) == (("a", 0), ("b", 0))  # one each, not two of "a"
        handed = [first, second]

        async def finish_b0_later() -> None:
            await anyio.sleep(0.05)
            queue.finished("b", Verdict.PASS)

        queue.finished("a", Verdict.FAIL)  # decided: "a" needs nothing more
        async with anyio.create_task_group() as tg:
            tg.start_soon(finish_b0_later)
            while (picked := await queue.next()) is not None:
                handed.append(picked)
                queue.finished(picked[0], Verdict.PASS)
        assert queue.stop_reasons()["a"].startswith("a regression task fails")
        return handed

    handed = anyio.run(main)
    assert handed == [("a", 0), ("b", 0), ("b", 1), ("b", 2), ("b", 3)]


RATES = {"always": 1.0, "never": 0.0, "half": 0.5}


def agent(prompt: str, ctx: TrialContext) -> str:
    if prompt == "crash":
        raise RuntimeError("broken")
    rate = RATES[prompt]
    return "yes" if (ctx.trial_index * 0.61803) % 1 < rate else "no"


def suite(kind: str = "capability") -> Suite:
    return Suite(
        id="adaptive",
        kind=kind,  # type: ignore[arg-type]
        harness=agent,
        graders=[graders.contains("yes")],
        tasks=[Task(id=name, input=name) for name in (*RATES, "crash")],
    )


def test_a_run_uses_as_many_trials_as_each_task_needs() -> None:
    report = run_sync(suite(), adaptive=Adaptive(max_trials=12, precision=0.3), concurrency=1)
    used = {t.id: (t.trials, t.passed) for t in report.tasks}
    # 9 of 9 gives a Wilson interval [0.701, 1]: 0.299 wide, under 0.3 (8 of 8: 0.324).
    assert used == {"always": (9, 9), "never": (9, 0), "half": (12, 6), "crash": (12, 0)}
    stopped = report.run.config["adaptive"]["stopped"]
    assert stopped["always"] == "the 95% interval is 0.30 wide (precision 0.3)"
    assert stopped["half"] == "it reached the most trials allowed (12)"
    assert stopped["crash"] == "it reached the most trials allowed (12)"
    assert report.task("always").stopped == stopped["always"]


def test_by_default_a_task_is_capped_at_its_own_trial_count() -> None:
    fixed = run_sync(suite("regression"), trials=None)
    adaptive = run_sync(suite("regression"), adaptive=Adaptive(), concurrency=1)
    for before, after in zip(fixed.tasks, adaptive.tasks, strict=True):
        assert after.verdict == before.verdict  # the same verdicts as a fixed run
        assert after.trials <= before.trials
    assert adaptive.task("never").trials == 1
    assert adaptive.task("always").trials == fixed.task("always").trials


def test_regression_tasks_stop_at_the_first_failure_even_with_many_workers() -> None:
    report = run_sync(
        suite("regression"), adaptive=Adaptive(max_trials=12, precision=0.3), concurrency=4
    )
    never = report.task("never")
    # the first trial fails; at most ceil(4 workers / 4 open tasks) = 1 ran alongside it
    assert never.trials == 1
    assert never.verdict == "fail"
    assert report.task("half").failed >= 1
    assert report.task("half").trials < 12


def test_trials_and_adaptive_are_exclusive() -> None:
    with pytest.raises(ValueError, match="either trials or adaptive"):
        Runner(trials=3, adaptive=Adaptive())


def forget_trials(db: Path, run_id: str, task_ids: list[str], since: int) -> None:
    """Delete trials from `since` on, as if the run had been killed before storing them."""
    marks = ",".join("?" for _ in task_ids)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        for table, column in (("scores", "trial_idx"), ("trials", "idx")):
            conn.execute(
                f"DELETE FROM {table} WHERE run_id = ? AND task_id IN ({marks}) AND {column} >= ?",
                (run_id, *task_ids, since),
            )


def test_an_adaptive_run_resumes_with_what_it_had(tmp_path: Path) -> None:
    policy = Adaptive(max_trials=12, precision=0.3)
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        whole = run_sync(suite(), adaptive=policy, concurrency=1)
        first = run_sync(suite(), adaptive=policy, concurrency=1, store=store)
    forget_trials(tmp_path / "s.db", first.run.id, ["always", "half"], since=5)
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        resumed = run_sync(suite(), store=store, resume=first.run.id, concurrency=1)
    counts = {t.id: (t.trials, t.passed) for t in resumed.tasks}
    assert counts == {t.id: (t.trials, t.passed) for t in whole.tasks}


def test_reports_say_how_the_tasks_stopped() -> None:
    report = run_sync(suite(), adaptive=Adaptive(max_trials=12, precision=0.3), concurrency=1)
    assert (
        "| Adaptive trials (precision 0.3) | tasks stopped: 2 with a narrow enough interval, "
        "2 at their cap |" in report.to_markdown()
    )
    assert "Adaptive" not in run_sync(suite(), trials=2).to_markdown()


@pytest.mark.parametrize(
    "policy",
    [
        Adaptive(),
        Adaptive(max_trials=7, precision=0.15, min_trials=2),
        Adaptive(baseline={"a": (3, 4), "b": (0, 0)}, alpha=0.01),
    ],
)
def test_the_policy_a_run_keeps_in_its_config_is_the_policy(policy: Adaptive) -> None:
    kept = json.loads(json.dumps(policy.to_config()))  # as the store keeps a run's config
    assert kept["stopped"] == {}
    assert Adaptive.from_config(kept) == policy
