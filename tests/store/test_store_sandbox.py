"""`m016_trial_sandbox`: which sandbox ran a trial (`Trial.sandbox`) is stored and read back, in
full and in reports, on SQLite and PostgreSQL; a store from before it is upgraded, its trials
read back without one."""

from __future__ import annotations

from typing import Any, cast

import pytest
from sqlalchemy import Connection, MetaData, create_engine, insert, inspect
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import Dialect

from trialkit.store import Store
from trialkit.store import rows as store_rows
from trialkit.store.engine import create_store_engine
from trialkit.store.migrations import MIGRATIONS, applied_migrations, m016_trial_sandbox, migrate
from trialkit.trial import SandboxRecord

from ._samples import Sample, make_sample

BWRAP = SandboxRecord(
    provider="bwrap",
    isolated=True,
    network="model-only",
    grader_network="none",
    limits={"memory_bytes": 2_000_000_000, "cpu_seconds": 1.5, "output_bytes": 10_000_000},
    details={"cgroup": "v1"},
    limit_hit="memory",
)
DOCKER = SandboxRecord(
    provider="docker",
    isolated=True,
    network="none",
    grader_network="none",
    image="trialkit-base:bookworm",
)


def with_sandboxes(sample: Sample) -> Sample:
    first, second, *rest = sample.trials
    sample.trials = [
        first.model_copy(update={"sandbox": BWRAP}),
        second.model_copy(update={"sandbox": DOCKER}),
        *rest,
    ]
    return sample


def test_a_trials_sandbox_is_stored_and_read_back(store: Store, sample: Sample) -> None:
    with_sandboxes(sample)
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    for trial in sample.trials:
        loaded = store.load_trial(trial.run_id, trial.task_id, trial.index)
        assert loaded == trial
    loaded = store.load_trial(sample.trials[0].run_id, sample.trials[0].task_id, 0)
    assert loaded.sandbox == BWRAP
    assert isinstance(loaded.sandbox.limits["memory_bytes"], int)  # not 2e9 as a float
    report = store.load_report(sample.run.id)
    listed = {
        (task.id, result.trial): result.sandbox for task in report.tasks for result in task.results
    }
    expected = {(t.task_id, t.index): t.sandbox for t in sample.trials}
    assert listed == expected
    assert BWRAP in listed.values() and DOCKER in listed.values() and None in listed.values()


def test_a_store_from_before_m016_is_upgraded(db_url: str) -> None:
    old = make_sample("old-run", name="before")
    engine = create_store_engine(db_url)
    try:
        migrate(engine, where=db_url, migrations=MIGRATIONS[:-1])
        with engine.begin() as conn:
            tables = MetaData()
            tables.reflect(conn)
            assert "sandbox" not in tables.tables["trials"].c
            conn.execute(insert(tables.tables["runs"]), store_rows.run_row(old.run, old.suite))
            conn.execute(
                insert(tables.tables["run_tasks"]), store_rows.task_rows(old.run.id, old.plans)
            )
            trials = tables.tables["trials"]
            rows: list[dict[str, Any]] = [
                {k: v for k, v in store_rows.trial_row(t).items() if k in trials.c}
                for t in old.trials
            ]
            conn.execute(insert(trials), rows)
            scores = [row for t in old.trials for row in store_rows.score_rows(t)]
            conn.execute(insert(tables.tables["scores"]), scores)
    finally:
        engine.dispose()

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            assert applied_migrations(conn)[-1] == "m016_trial_sandbox"
        for trial in old.trials:
            assert store.load_trial(trial.run_id, trial.task_id, trial.index).sandbox is None
        new = with_sandboxes(make_sample("new-run", name="after"))
        store.create_run(new.run, new.suite, new.plans)
        store.save_trials(new.trials)
        assert store.load_trial("new-run", new.trials[1].task_id, new.trials[1].index).sandbox == (
            DOCKER
        )
    checked = create_engine(db_url)
    try:
        assert "sandbox" in {c["name"] for c in inspect(checked).get_columns("trials")}
    finally:
        checked.dispose()


class _RecordingConnection:
    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.statements: list[str] = []

    def exec_driver_sql(self, statement: str) -> None:
        self.statements.append(statement)


@pytest.mark.parametrize("dialect", [SQLiteDialect, PGDialect], ids=["sqlite", "postgresql"])
def test_m016_is_plain_alter_table_add_column(dialect: type[Dialect]) -> None:
    conn = _RecordingConnection(dialect())
    m016_trial_sandbox(cast(Connection, conn))
    assert conn.statements == ["ALTER TABLE trials ADD COLUMN sandbox TEXT"]


def test_the_viewers_trial_page_shows_the_sandbox(store: Store, sample: Sample) -> None:
    from tests.view.test_view import Page, get
    from trialkit.view import ViewServer

    with_sandboxes(sample)
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    first, second = sample.trials[:2]
    with ViewServer(store) as server:
        status, _, body = get(server, f"/runs/{first.run_id}/trials/{first.task_id}/0")
        _, _, other = get(server, f"/runs/{second.run_id}/trials/{second.task_id}/1")
    assert status == 200
    assert (
        "sandbox bwrap (isolated), network model-only / graders none, limits cpu_seconds=1.5 "
        "memory_bytes=2000000000 output_bytes=10000000; hit: memory" in Page(body).visible
    )
    assert "docker (isolated), network none / graders none, image trialkit-base:bookworm" in (
        Page(other).visible
    )
