"""What each task expects (`run_tasks.reference` / `criteria`, m009_task_reference): from the
task to its plan, through the store on each backend, redacted, kept out of the report, and NULL
in a store written before m009."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, select

from trialkit import Task, graders
from trialkit.report import TaskPlan
from trialkit.secrets import REDACTED
from trialkit.store import Store, queries
from trialkit.store.migrations import MIGRATIONS, applied_migrations, m009_task_reference
from trialkit.store.schema import run_tasks
from trialkit.task import SuiteKind

from ._samples import make_sample
from .test_store_upgrade import _write_old_store

SECRET = "sk-referencesecret-0123456789"


def test_a_plan_carries_the_tasks_reference_and_criteria() -> None:
    task = Task(
        id="france",
        input="Capital of France?",
        reference="Paris",
        criteria="Names Paris, and nothing else.",
        graders=[graders.contains("Paris")],
    )
    plan = TaskPlan.of(task, SuiteKind.REGRESSION)
    assert (plan.reference, plan.criteria) == ("Paris", "Names Paris, and nothing else.")

    bare = TaskPlan.of(Task(id="bare", input="x"), SuiteKind.REGRESSION)
    assert (bare.reference, bare.criteria) == (None, None)


def test_references_and_criteria_round_trip_redacted_and_stay_out_of_the_report(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFERENCETEST_API_KEY", SECRET)
    sample = make_sample("expected")
    sample.plans = [
        TaskPlan(
            id="france",
            kind=SuiteKind.REGRESSION,
            reference="Paris <script>alert(1)</script>\nline two \x00",
            criteria=f"Says Paris; never prints {SECRET}.",
        ),
        TaskPlan(id="json", kind=SuiteKind.CAPABILITY, criteria="Valid JSON."),
        TaskPlan(id="tools", kind=SuiteKind.REGRESSION),
    ]
    store.create_run(sample.run, sample.suite, sample.plans)

    france = queries.task_plan(store, "expected", "france")
    assert france is not None
    assert france.reference == "Paris <script>alert(1)</script>\nline two \x00"
    assert france.criteria == f"Says Paris; never prints {REDACTED}."
    json_plan = queries.task_plan(store, "expected", "json")
    assert json_plan is not None and (json_plan.reference, json_plan.criteria) == (
        None,
        "Valid JSON.",
    )
    tools = queries.task_plan(store, "expected", "tools")
    assert tools is not None and (tools.reference, tools.criteria) == (None, None)
    assert queries.task_plan(store, "expected", "no-such-task") is None
    assert queries.task_plan(store, "no-such-run", "france") is None

    with store._engine.connect() as conn:
        stored = conn.scalars(select(run_tasks.c.criteria)).all()
    assert not any(SECRET in (text or "") for text in stored)

    report = store.load_report("expected")
    assert "reference" not in report.to_json() and "Valid JSON." not in report.to_json()


def test_a_store_written_before_m009_gets_the_columns_and_no_references(db_url: str) -> None:
    old = make_sample("old-run")
    previous = list(MIGRATIONS[: MIGRATIONS.index(m009_task_reference)])
    _write_old_store(db_url, old, previous)

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            assert applied_migrations(conn) == [m.__name__ for m in MIGRATIONS]
            columns = {c["name"]: c for c in inspect(conn).get_columns("run_tasks")}
        assert columns["reference"]["nullable"] and columns["criteria"]["nullable"]
        plans = [queries.task_plan(store, "old-run", plan.id) for plan in old.plans]
        report = store.load_report("old-run")

    assert [(p.reference, p.criteria) for p in plans if p is not None] == [(None, None)] * len(
        old.plans
    )
    assert [t.id for t in report.tasks] == [plan.id for plan in old.plans]
