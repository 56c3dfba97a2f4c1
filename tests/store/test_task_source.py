"""Where tasks are defined (`run_tasks.file` / `line`, m007_task_source) and when trials
started, through the store and the JSON report, on each backend."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import inspect

from trialkit.report import TaskPlan
from trialkit.reports.json import load_json_report
from trialkit.score import Verdict
from trialkit.store import Store
from trialkit.store.migrations import MIGRATIONS, applied_migrations, m007_task_source
from trialkit.task import SuiteKind

from ._samples import T0, make_sample, make_trial
from .test_store_upgrade import _write_old_store


def test_locations_and_wall_times_round_trip(db_url: str) -> None:
    sample = make_sample("located")
    sample.plans = [
        TaskPlan(id="france", kind=SuiteKind.REGRESSION, file="suites/geo/suite.yaml", line=12),
        TaskPlan(id="json", kind=SuiteKind.CAPABILITY, file="evals.py", line=40),
        TaskPlan(id="tools", kind=SuiteKind.REGRESSION),
    ]
    trials = [
        make_trial("located", "france", 0, started_at=T0),
        # make_trial starts trial N at started_at + N s: these two overlap (side by side)
        make_trial("located", "france", 1, started_at=T0 - timedelta(seconds=0.9)),
        make_trial("located", "json", 0, verdict=Verdict.FAIL, started_at=T0),
    ]
    with Store(db_url) as store:
        store.create_run(sample.run, sample.suite, sample.plans)
        store.save_trials(trials)
        finished = sample.run.model_copy(
            update={"status": "completed", "finished_at": T0 + timedelta(seconds=9)}
        )
        store.finish_run(finished)

        report = store.load_report("located")
        big = store.load_report("located", max_results=1)  # counted in SQL

    for loaded in (report, big):
        located = [(t.id, t.file, t.line) for t in loaded.tasks]
        assert located == [
            ("france", "suites/geo/suite.yaml", 12),
            ("json", "evals.py", 40),
            ("tools", None, None),
        ]
        france = loaded.task("france")
        starts = [t.started_at for t in trials[:2]]
        ends = [t.started_at + timedelta(seconds=t.duration_s) for t in trials[:2]]
        assert france.wall_s == pytest.approx((max(ends) - min(starts)).total_seconds())
        assert france.wall_s < sum(t.duration_s for t in trials[:2])
        assert loaded.task("tools").wall_s is None
    assert report.task("france").results[1].started_at == trials[1].started_at

    again = load_json_report(report.to_json())
    assert again == report
    assert again.task("france").file == "suites/geo/suite.yaml"


def test_a_store_written_before_m007_gets_the_columns_and_no_locations(db_url: str) -> None:
    old = make_sample("old-run")
    previous = list(MIGRATIONS[: MIGRATIONS.index(m007_task_source)])
    for plan in old.plans:
        plan.file, plan.line = None, None
    _write_old_store(db_url, old, previous)

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            assert applied_migrations(conn) == [m.__name__ for m in MIGRATIONS]
            columns = {c["name"]: c for c in inspect(conn).get_columns("run_tasks")}
        assert columns["file"]["nullable"] and columns["line"]["nullable"]
        report = store.load_report("old-run")

    assert [(t.file, t.line) for t in report.tasks] == [(None, None)] * len(old.plans)
