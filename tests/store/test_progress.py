"""`store.progress.run_progress` on SQLite and PostgreSQL: counts by verdict, the plan, and the
finished trials paged in the order they ended (a start plus a duration), to the microsecond."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.store._samples import T0, make_sample, make_trial
from trialkit.score import Verdict
from trialkit.store import RunNotFound, Store
from trialkit.store.progress import run_progress


def test_counts_plan_and_the_order_trials_finished_in(store: Store) -> None:
    sample = make_sample("run-live")
    store.create_run(sample.run, sample.suite, sample.plans)
    empty = run_progress(store, "run-live")
    assert (empty.status, empty.done, empty.trials) == ("running", 0, [])
    assert empty.planned == 2 * len(sample.plans)  # a run without planned_trials: tasks × trials

    # json#0 starts last but ends first: by 1 µs, which a millisecond clock would not see.
    times = {("json", 0): (500, 2.0), ("france", 1): (0, 2.000501), ("france", 0): (0, 4.0)}
    verdicts = {("json", 0): Verdict.FAIL, ("france", 1): Verdict.ERROR}
    trials = []
    for (task, index), (micros, duration) in times.items():
        verdict = verdicts.get((task, index), Verdict.PASS)
        trial = make_trial("run-live", task, index, verdict=verdict)
        started = T0 + timedelta(seconds=1, microseconds=micros)
        trials.append(trial.model_copy(update={"started_at": started, "duration_s": duration}))
    store.save_trials(trials)

    found = run_progress(store, "run-live")
    assert (found.done, found.passed, found.failed, found.errors, found.unknown) == (3, 1, 1, 1, 0)
    order = [(t.task_id, t.index) for t in found.trials]
    assert order == [("json", 0), ("france", 1), ("france", 0)]
    later = run_progress(store, "run-live", after=1, limit=1)
    assert [(t.task_id, t.index) for t in later.trials] == [("france", 1)]
    assert later.after == 1 and later.done == 3
    assert run_progress(store, "run-live", after=3).trials == []
    assert run_progress(store, "run-live", limit=0).trials == []

    finished = sample.run.model_copy(
        update={"status": "completed", "config": {"planned_trials": 3}}
    )
    store.finish_run(finished)
    done = run_progress(store, "run-live")
    assert (done.status, done.planned) == ("completed", 3)


def test_an_unknown_run_is_refused(store: Store) -> None:
    with pytest.raises(RunNotFound):
        run_progress(store, "no-such-run")
