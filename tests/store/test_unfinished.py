"""The store keeps each task's planned trials, so a run's trials that never finished are found
and stored as errors that every report counts (SQLite and PostgreSQL)."""

from __future__ import annotations

from trialkit import Suite, Task, graders
from trialkit.report import TaskPlan
from trialkit.run.adaptive import Adaptive
from trialkit.run.runner import run_sync
from trialkit.score import Verdict
from trialkit.store import Store
from trialkit.store.resume import load_run
from trialkit.store.unfinished import UNFINISHED_ERROR, store_unfinished, unfinished_tasks
from trialkit.task import SuiteKind

from ._samples import make_sample


def test_a_run_keeps_each_tasks_planned_trials(store: Store) -> None:
    suite = Suite(
        id="planned",
        trials=2,
        harness=lambda prompt: "yes",
        tasks=[
            Task(id="two", input="a", graders=[graders.contains("yes")]),
            Task(id="five", input="b", trials=5, graders=[graders.contains("yes")]),
        ],
    )
    fixed = run_sync(suite, store=store).run.id
    adaptive = run_sync(suite, store=store, adaptive=Adaptive(precision=0.9)).run.id
    assert [p.trials for p in load_run(store, fixed)[2]] == [2, 5]
    assert [p.trials for p in load_run(store, adaptive)[2]] == [None, None]  # at most: unknown
    assert unfinished_tasks(store, fixed) == {}
    assert unfinished_tasks(store, adaptive) == {}


def test_unfinished_trials_are_stored_as_errors_every_report_counts(store: Store) -> None:
    sample = make_sample("run-lost")
    sample.plans = [
        TaskPlan(id="france", kind=SuiteKind.REGRESSION, trials=3),  # 2 stored, #2 lost
        TaskPlan(id="json", kind=SuiteKind.CAPABILITY, expect="failure", trials=2),  # complete
        TaskPlan(id="tools", kind=SuiteKind.REGRESSION, trials=2),  # 1 stored, #1 lost
        TaskPlan(id="never-ran", kind=SuiteKind.REGRESSION, trials=2),  # none stored
        TaskPlan(id="unknown-plan", kind=SuiteKind.REGRESSION),  # no plan kept: left alone
    ]
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    found = unfinished_tasks(store, "run-lost")
    assert {task: (u.planned, u.stored, u.missing) for task, u in found.items()} == {
        "france": (3, 2, (2,)),
        "tools": (2, 1, (1,)),
        "never-ran": (2, 0, (0, 1)),
    }
    before = store.load_report("run-lost")
    reasons = {"france": "never finished: the worker crashed", "tools": "never finished"}
    assert store_unfinished(store, "run-lost", found, reasons) == 2
    assert set(unfinished_tasks(store, "run-lost")) == {"never-ran"}  # no reason: left
    report = store.load_report("run-lost")
    france = report.task("france")
    assert (france.trials, france.errors, france.verdict) == (3, 1, Verdict.FAIL)
    lost = france.results[2]
    assert (lost.trial, lost.verdict) == (2, Verdict.ERROR)
    assert lost.error is not None and lost.error.type == UNFINISHED_ERROR
    assert lost.error.message == "never finished: the worker crashed"
    assert report.task("tools").verdict is Verdict.ERROR
    assert report.summary.errors == before.summary.errors + 2
    assert report.summary.trials == before.summary.trials + 2
    [listed] = [run for run in store.list_runs() if run.id == "run-lost"]
    assert listed.errors == report.summary.errors
