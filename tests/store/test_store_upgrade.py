"""A store written by an older trialkit is upgraded in place when it is opened."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import Connection, MetaData, Table, create_engine, insert, inspect, select
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import Dialect

from trialkit.report import RunInfo, TrialResult, build_report
from trialkit.store import Store
from trialkit.store import rows as store_rows
from trialkit.store.engine import create_store_engine
from trialkit.store.migrations import (
    MIGRATIONS,
    Migration,
    applied_migrations,
    m001_initial,
    m002_grader_usage,
    m004_packed_payloads,
    migrate,
)
from trialkit.store.schema import TOKEN_COLUMNS
from trialkit.store.schema import trials as trials_table
from trialkit.transcript import Usage
from trialkit.trial import Trial

from ._samples import Sample, make_sample, make_trial

NEW_COLUMNS = ("grader_usage", "grader_cost_usd")
ALL_MIGRATIONS = [m.__name__ for m in MIGRATIONS]


def _write_first_schema_store(url: str, sample: Sample) -> None:
    """The store as the first trialkit wrote it: only m001 applied, and rows as m001 has them
    (JSON as text, no grader or token columns)."""
    _write_old_store(url, sample, [m001_initial])
    engine = create_engine(url)
    try:
        columns = {c["name"] for c in inspect(engine).get_columns("trials")}
        assert not set(NEW_COLUMNS) & columns
    finally:
        engine.dispose()


def _write_old_store(url: str, sample: Sample, migrations: list[Migration]) -> None:
    """The store as a trialkit that knew only `migrations` wrote it: rows inserted into the
    tables as the database has them."""
    engine = create_store_engine(url)
    try:
        migrate(engine, where=url, migrations=migrations)
        with engine.begin() as conn:
            tables = MetaData()
            tables.reflect(conn)
            trials = tables.tables["trials"]
            conn.execute(
                insert(tables.tables["runs"]), store_rows.run_row(sample.run, sample.suite)
            )
            conn.execute(
                insert(tables.tables["run_tasks"]),
                store_rows.task_rows(sample.run.id, sample.plans),
            )
            conn.execute(insert(trials), [_m001_row(t, trials) for t in sample.trials])
            scores = [row for t in sample.trials for row in store_rows.score_rows(t)]
            conn.execute(insert(tables.tables["scores"]), scores)
    finally:
        engine.dispose()


def _m001_row(trial: Trial, table: Table) -> dict[str, Any]:
    row = store_rows.trial_row(trial)
    row["transcript"] = trial.transcript.model_dump_json()
    row["outcome"] = trial.outcome.model_dump_json(exclude={"output"})
    return {name: value for name, value in row.items() if name in table.c}


def _without_graders(trial: Trial) -> Trial:
    """What an older trialkit knew of a trial: the agent's usage and the total cost only."""
    return trial.model_copy(update={"grader_usage": Usage(), "grader_cost_usd": None})


def test_a_store_of_the_first_schema_is_upgraded_and_keeps_its_trials(db_url: str) -> None:
    old = make_sample("old-run", name="before")
    old.trials = [_without_graders(t) for t in old.trials]
    _write_first_schema_store(db_url, old)

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            assert applied_migrations(conn) == ALL_MIGRATIONS
            columns = [c["name"] for c in inspect(conn).get_columns("trials")]
            assert columns == [c.name for c in trials_table.columns]
            stored = conn.execute(select(*(trials_table.c[c] for c in NEW_COLUMNS))).all()
            assert stored == [(None, None)] * len(old.trials)
            packed = select(trials_table.c.transcript_packed, trials_table.c.outcome_packed)
            assert conn.execute(packed).all() == [(None, None)] * len(old.trials)

        for trial in old.trials:
            loaded = store.load_trial(trial.run_id, trial.task_id, trial.index)
            assert loaded == trial
            assert loaded.grader_usage == Usage()
            assert loaded.grader_cost_usd is None
        report = store.load_report(old.run.id)
        assert report.summary.grader_usage.is_empty()
        assert report.summary.grader_cost_usd is None
        assert report.summary.cost_usd is None  # one old trial's cost was unknown

        new = make_sample("new-run", name="after")
        judged = make_trial("new-run", "france", 2).model_copy(
            update={
                "grader_usage": Usage(input_tokens=50, output_tokens=5, cache_read_tokens=10),
                "cost_usd": 0.003,
                "grader_cost_usd": 0.002,
            }
        )
        new.trials.append(judged)
        store.create_run(new.run, new.suite, new.plans)
        store.save_trials(new.trials)

        for trial in new.trials:
            assert store.load_trial(trial.run_id, trial.task_id, trial.index) == trial
        loaded = store.load_trial("new-run", "france", 2)
        assert loaded.grader_usage == Usage(input_tokens=50, output_tokens=5, cache_read_tokens=10)
        assert loaded.grader_cost_usd == 0.002
        france = store.load_report("new-run").task("france")
        assert france.grader_usage == Usage(input_tokens=50, output_tokens=5, cache_read_tokens=10)
        assert france.grader_cost_usd is None  # trials #0 and #1 recorded no grader call
        assert store.load_report("new-run").task("tools").grader_cost_usd == 0.0004

    with Store(db_url) as reopened, reopened._engine.connect() as conn:
        assert applied_migrations(conn) == ALL_MIGRATIONS


def test_the_upgrade_fills_the_token_columns_from_the_json(db_url: str) -> None:
    old = make_sample("old-run")
    tools = next(t for t in old.trials if t.task_id == "tools")
    _write_old_store(db_url, old, [m001_initial, m002_grader_usage])

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            row = conn.execute(
                select(*(trials_table.c[name] for name in TOKEN_COLUMNS)).where(
                    trials_table.c.task_id == "tools"
                )
            ).one()
            others = conn.execute(
                select(*(trials_table.c[name] for name in TOKEN_COLUMNS)).where(
                    trials_table.c.task_id != "tools"
                )
            ).all()
        assert dict(zip(TOKEN_COLUMNS, row, strict=True)) == store_rows.token_columns(
            tools.usage, tools.grader_usage
        )
        assert row.cache_read_tokens == 100
        assert row.grader_input_tokens == 9
        assert others == [(0,) * len(TOKEN_COLUMNS)] * (len(old.trials) - 1)
        # Computed in SQL (every task "big"), the old rows add up as the report in memory does.
        for max_results in (0, 1):
            expected = build_report(
                old.run, old.suite, old.plans, _results(old), max_results=max_results
            )
            report = store.load_report(old.run.id, max_results=max_results)
            assert report.model_dump() == expected.model_dump()
        assert report.summary.usage.cache_read_tokens == 100


def test_the_upgrade_fills_each_trials_end_from_its_start_and_duration(db_url: str) -> None:
    old = make_sample("old-run")
    _write_old_store(db_url, old, list(MIGRATIONS[:9]))  # up to m009: no ended_at yet

    with Store(db_url) as store:
        with store._engine.connect() as conn:
            c = trials_table.c
            ends = dict(
                ((row.task_id, row.idx), row.ended_at)
                for row in conn.execute(select(c.task_id, c.idx, c.ended_at))
            )
            indexes = {ix["name"] for ix in inspect(conn).get_indexes("trials")}
        assert ends == {
            (t.task_id, t.index): (t.started_at + timedelta(seconds=t.duration_s))
            .astimezone(UTC)
            .isoformat(timespec="microseconds")
            for t in old.trials
        }
        assert {"ix_trials_task_span", "ix_trials_run_ended"} <= indexes
        assert "ix_trials_task_duration" not in indexes
        # The wall span read from the ends is the one the report in memory computes.
        for max_results in (0, 1):
            expected = build_report(
                old.run, old.suite, old.plans, _results(old), max_results=max_results
            )
            report = store.load_report(old.run.id, max_results=max_results)
            assert report.model_dump() == expected.model_dump()


def _results(sample: Sample) -> dict[str, list[TrialResult]]:
    results: dict[str, list[TrialResult]] = {}
    for trial in sample.trials:
        results.setdefault(trial.task_id, []).append(TrialResult.from_trial(trial))
    return results


def test_empty_grader_usage_is_stored_as_null_and_read_back_as_empty(
    store: Store, sample: Sample
) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)

    with store._engine.connect() as conn:
        stored = dict(
            conn.execute(
                select(trials_table.c.task_id, trials_table.c.grader_usage).where(
                    trials_table.c.idx == 0
                )
            ).all()
        )

    assert stored["france"] is None
    assert stored["tools"] == Usage(input_tokens=9, output_tokens=2).model_dump_json()
    assert store.load_trial(sample.run.id, "france", 0).grader_usage == Usage()


def test_the_stored_report_keeps_the_graders_share(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    results: dict[str, list[TrialResult]] = {}
    for trial in sample.trials:
        results.setdefault(trial.task_id, []).append(TrialResult.from_trial(trial))

    report = store.load_report(sample.run.id)

    tools = report.task("tools")
    assert tools.grader_usage == Usage(input_tokens=9, output_tokens=2)
    assert tools.grader_cost_usd == 0.0004
    assert tools.cost_usd == 0.0127
    assert report.summary.grader_usage == Usage(input_tokens=9, output_tokens=2)
    expected = build_report(sample.run, sample.suite, sample.plans, results)
    assert report.summary == expected.summary


def test_a_stopped_run_is_listed_and_keeps_its_reason(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    reason = "the cost budget of $0.01 was spent ($0.0127) after 5 of 8 trials"
    stopped = sample.run.model_copy(
        update={
            "status": "stopped",
            "finished_at": sample.run.started_at,
            "config": {"model": "openai/gpt-4o-mini", "stop_reason": reason},
        }
    )

    store.finish_run(stopped)

    assert [r.status for r in store.list_runs()] == ["stopped"]
    run: RunInfo = store.load_report(sample.run.id).run
    assert (run.status, run.config["stop_reason"], run.config["model"]) == (
        "stopped",
        reason,
        "openai/gpt-4o-mini",
    )


class _RecordingConnection:
    """Stands in for a connection to another database: keeps the SQL a migration sends."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.statements: list[str] = []

    def exec_driver_sql(self, statement: str) -> None:
        self.statements.append(statement)


@pytest.mark.parametrize("dialect", [SQLiteDialect, PGDialect], ids=["sqlite", "postgresql"])
def test_m002_is_plain_alter_table_add_column(dialect: type[Dialect]) -> None:
    conn = _RecordingConnection(dialect())

    m002_grader_usage(cast(Connection, conn))

    assert conn.statements == [
        "ALTER TABLE trials ADD COLUMN grader_usage TEXT",
        "ALTER TABLE trials ADD COLUMN grader_cost_usd FLOAT",
    ]


@pytest.mark.parametrize("dialect", [SQLiteDialect, PGDialect], ids=["sqlite", "postgresql"])
def test_m004_is_plain_alter_table_add_column(dialect: type[Dialect]) -> None:
    conn = _RecordingConnection(dialect())

    m004_packed_payloads(cast(Connection, conn))

    blob = "BLOB" if dialect is SQLiteDialect else "BYTEA"
    assert conn.statements == [
        f"ALTER TABLE trials ADD COLUMN transcript_packed {blob}",
        f"ALTER TABLE trials ADD COLUMN outcome_packed {blob}",
    ]
