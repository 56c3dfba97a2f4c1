"""Append-only, recorded migrations of the store's schema.

Each migration is a function `mNNN_what(conn)` that runs inside the transaction that records
it in `trialkit_migrations`. A shipped migration is never edited: change the schema by adding
the next one to `MIGRATIONS` (and updating `schema.py` to match). A store that records a
migration this version does not know was written by a newer trialkit and is not opened.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Engine,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    false,
    inspect,
    literal,
    select,
    text,
    tuple_,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateColumn, CreateIndex, DropIndex

from trialkit.store import schema, search_index
from trialkit.store.encoding import escape_nul, unescape_nul, unpack_json
from trialkit.store.engine import WRITE_OPTION
from trialkit.store.errors import StoreError
from trialkit.store.migration_initial import m001_initial

Migration = Callable[[Connection], None]

# Serializes migrations between processes on PostgreSQL (SQLite's BEGIN IMMEDIATE already does).
_PG_MIGRATION_LOCK = 0x747269616C6B6974


def m002_grader_usage(conn: Connection) -> None:
    """The graders' share of a trial: `trials.grader_usage` (JSON of a Usage; NULL when the
    graders used none) and `trials.grader_cost_usd`. Rows written before stay NULL in both."""
    trials = Table(
        "trials",
        MetaData(),
        Column("grader_usage", Text),
        Column("grader_cost_usd", Float),
    )
    for column in trials.columns:
        conn.exec_driver_sql(add_column_sql(conn.dialect, column))


_USAGE_FIELDS = ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
_GRADER_FIELDS = ("input_tokens", "output_tokens", *_USAGE_FIELDS)
_BACKFILL_BATCH = 1000


def m003_usage_columns(conn: Connection) -> None:
    """Every `Usage` field as an integer column of `trials`, so that reports add tokens up in
    SQL: the agent's cache and reasoning tokens (`input_tokens` and `output_tokens` exist) and
    all of the graders' (`grader_*`). Rows written before get theirs from their JSON."""
    agent = [(name, name) for name in _USAGE_FIELDS]
    grader = [(f"grader_{name}", name) for name in _GRADER_FIELDS]
    md = MetaData()
    trials = Table(
        "trials",
        md,
        Column("run_id", String),
        Column("task_id", String),
        Column("idx", Integer),
        Column("usage", Text),
        Column("grader_usage", Text),
        *(Column(column, Integer, nullable=False, server_default="0") for column, _ in agent),
        *(Column(column, Integer, nullable=False, server_default="0") for column, _ in grader),
    )
    for column, _ in (*agent, *grader):
        conn.exec_driver_sql(add_column_sql(conn.dialect, trials.c[column]))
    key = (trials.c.run_id, trials.c.task_id, trials.c.idx)
    update = (
        trials.update()
        .where(*(c == bindparam(f"k_{c.name}") for c in key))
        .values({column: bindparam(column) for column, _ in (*agent, *grader)})
    )
    last: tuple[Any, ...] | None = None
    while True:  # by key, in batches: a big store's rows are never all in memory
        page = select(*key, trials.c.usage, trials.c.grader_usage).order_by(*key)
        if last is not None:
            page = page.where(tuple_(*key) > tuple_(*(literal(v) for v in last)))
        rows = conn.execute(page.limit(_BACKFILL_BATCH)).all()
        if not rows:
            return
        last = tuple(rows[-1][:3])
        changes = []
        for row in rows:
            usage = json.loads(row.usage)
            graders = json.loads(row.grader_usage) if row.grader_usage else {}
            values = {column: usage.get(name, 0) for column, name in agent}
            values |= {column: graders.get(name, 0) for column, name in grader}
            if any(values.values()):
                keys = {f"k_{c.name}": v for c, v in zip(key, row[:3], strict=True)}
                changes.append(keys | values)
        if changes:
            conn.execute(update, changes)


def m004_packed_payloads(conn: Connection) -> None:
    """`trials.transcript_packed` and `trials.outcome_packed`: a large transcript or outcome
    compressed (see `encoding.pack_json`), its text column then empty. Rows written before keep
    their text."""
    trials = Table(
        "trials",
        MetaData(),
        Column("transcript_packed", LargeBinary),
        Column("outcome_packed", LargeBinary),
    )
    for column in trials.columns:
        conn.exec_driver_sql(add_column_sql(conn.dialect, column))


def m005_report_indexes(conn: Connection) -> None:
    """Indexes for reports of big runs: per task, the verdicts, tokens and costs (covering,
    so the wide rows are never read), the durations (for percentiles), and the score values.
    `ix_trials_report` starts with (run_id, task_id, verdict): it replaces
    `ix_trials_run_verdict` for counting a run's verdicts, which saves an index per insert."""
    tokens = (
        "input_tokens",
        "output_tokens",
        *_USAGE_FIELDS,
        *(f"grader_{name}" for name in _GRADER_FIELDS),
    )
    md = MetaData()
    trials = Table(
        "trials",
        md,
        *(Column(name, String) for name in ("run_id", "task_id", "verdict")),
        *(Column(name, Integer) for name in ("idx", *tokens)),
        *(Column(name, Float) for name in ("cost_usd", "grader_cost_usd", "duration_s")),
    )
    scores = Table(
        "scores", md, Column("run_id", String), Column("task_id", String), Column("value", Float)
    )
    conn.execute(DropIndex(Index("ix_trials_run_verdict", trials.c.run_id, trials.c.verdict)))
    c = trials.c
    for index in (
        Index(
            "ix_trials_report",
            *(c.run_id, c.task_id, c.verdict, c.idx),
            *(c[name] for name in tokens),
            *(c.cost_usd, c.grader_cost_usd),
        ),
        Index("ix_trials_task_duration", c.run_id, c.task_id, c.duration_s),
        Index("ix_trials_run_duration", c.run_id, c.duration_s),
        Index("ix_scores_run_task_value", scores.c.run_id, scores.c.task_id, scores.c.value),
    ):
        conn.execute(CreateIndex(index))


def m006_labels(conn: Connection) -> None:
    """Human review: `scores.pending` (a score waiting for a reviewer) and an index on it, so
    that reports and `trialkit review` find those in SQL, and the `labels` table: a reviewer's
    label per trial and grader. Pending scores stored before are marked from the JSON."""
    md = MetaData()
    trials = Table(
        "trials",
        md,
        *(Column(name, String) for name in ("run_id", "task_id", "scores")),
        Column("idx", Integer),
    )
    scores = Table(
        "scores",
        md,
        *(Column(name, String) for name in ("run_id", "task_id")),
        *(Column(name, Integer) for name in ("trial_idx", "position")),
        Column("pending", Boolean, nullable=False, server_default=false()),
    )
    conn.exec_driver_sql(add_column_sql(conn.dialect, scores.c.pending))
    s = scores.c
    conn.execute(
        CreateIndex(Index("ix_scores_pending", s.run_id, s.pending, s.task_id, s.trial_idx))
    )
    Table(
        "labels",
        md,
        Column("run_id", String, primary_key=True),
        Column("task_id", String, primary_key=True),
        Column("trial_idx", Integer, primary_key=True),
        Column("grader", String, primary_key=True),
        Column("verdict", String, nullable=False),
        Column("score", Float),
        Column("reviewer", Text),
        Column("labeled_at", String(32), nullable=False),
        Column("comment", Text),
        ForeignKeyConstraint(
            ["run_id", "task_id", "trial_idx"],
            ["trials.run_id", "trials.task_id", "trials.idx"],
            ondelete="CASCADE",
        ),
    ).create(conn)
    # Only a trial whose JSON says so can hold a pending score; the JSON decides which.
    candidates = select(trials.c.run_id, trials.c.task_id, trials.c.idx, trials.c.scores).where(
        trials.c.scores.contains('"pending":true', autoescape=True)
    )
    key = (s.run_id, s.task_id, s.trial_idx, s.position)
    mark = scores.update().where(*(c == bindparam(f"k_{c.name}") for c in key)).values(pending=True)
    marked = [
        {"k_run_id": row.run_id, "k_task_id": row.task_id, "k_trial_idx": row.idx, "k_position": i}
        for row in conn.execute(candidates).all()
        for i, score in enumerate(json.loads(row.scores))
        if score.get("pending") is True
    ]
    if marked:
        conn.execute(mark, marked)


def m007_task_source(conn: Connection) -> None:
    """Where each planned task is defined: `run_tasks.file` and `run_tasks.line` (for CI
    annotations and JUnit). Rows written before stay NULL in both."""
    run_tasks = Table("run_tasks", MetaData(), Column("file", Text), Column("line", Integer))
    for column in run_tasks.columns:
        conn.exec_driver_sql(add_column_sql(conn.dialect, column))


def m008_search(conn: Connection) -> None:
    """The search index: `search_docs` (a trial's input, output, error and grader rationales,
    one row each) with the database's full-text index over it (SQLite: the FTS5 table
    `search_fts` and its triggers; PostgreSQL: a GIN index), and `trial_tools` (the tools each
    trial called). Trials stored before are indexed from their rows, in batches."""
    md = MetaData()

    def of_trial(*, key: bool) -> list[Any]:
        return [
            Column("run_id", Text, nullable=False, primary_key=key),
            Column("task_id", Text, nullable=False, primary_key=key),
            Column("trial_idx", Integer, nullable=False, primary_key=key),
            ForeignKeyConstraint(
                ["run_id", "task_id", "trial_idx"],
                ["trials.run_id", "trials.task_id", "trials.idx"],
                ondelete="CASCADE",
            ),
        ]

    trials = Table(
        "trials",
        md,
        *(Column(name, Text) for name in ("run_id", "task_id", "output", "error", "verdict")),
        Column("idx", Integer, primary_key=True),
        Column("transcript", Text),
        Column("transcript_packed", LargeBinary),
        Column("scores", Text),
    )
    docs = Table(
        "search_docs",
        md,
        Column("id", Integer, primary_key=True),
        *of_trial(key=False),
        Column("field", String, nullable=False),
        Column("position", Integer, nullable=False),
        Column("grader", Text),
        Column("text", Text, nullable=False),
        Column("tags", Text, nullable=False),
        Index("ix_search_docs_trial", "run_id", "task_id", "trial_idx"),
    )
    tools = Table(
        "trial_tools",
        md,
        *of_trial(key=True),
        Column("name", Text, primary_key=True),
    )
    docs.create(conn)
    tools.create(conn)
    search_index.create_fulltext(conn)
    run_suites = Table("runs", md, Column("id", Text), Column("suite_id", Text))
    suites = {row.id: row.suite_id for row in conn.execute(select(run_suites))}
    key = (trials.c.run_id, trials.c.task_id, trials.c.idx)
    columns = (trials.c.output, trials.c.error, trials.c.transcript, trials.c.transcript_packed)
    last: tuple[Any, ...] | None = None
    while True:  # by key, in batches: a big store's rows are never all in memory
        page = select(*key, *columns, trials.c.scores, trials.c.verdict).order_by(*key)
        if last is not None:
            page = page.where(tuple_(*key) > tuple_(*(literal(v) for v in last)))
        rows = conn.execute(page.limit(_SEARCH_BATCH)).all()
        if not rows:
            return
        last = tuple(rows[-1][:3])
        found_docs, found_tools = [], []
        for row in rows:
            found = search_index.documents(
                search_index.Indexed(
                    run_id=unescape_nul(row.run_id),
                    task_id=unescape_nul(row.task_id),
                    index=row.idx,
                    suite_id=unescape_nul(suites.get(row.run_id) or ""),
                    verdict=row.verdict,
                    transcript=json.loads(unpack_json(row.transcript, row.transcript_packed)),
                    output=None if row.output is None else unescape_nul(row.output),
                    error=None if row.error is None else json.loads(row.error),
                    scores=json.loads(row.scores),
                )
            )
            found_docs.extend(found[0])
            found_tools.extend(found[1])
        for row_of in (*found_docs, *found_tools):  # as SafeText columns hold them
            for column in ("run_id", "task_id", "text", "grader", "name"):
                if row_of.get(column) is not None:
                    row_of[column] = escape_nul(row_of[column])
        if found_docs:
            conn.execute(docs.insert(), found_docs)
        if found_tools:
            conn.execute(tools.insert(), found_tools)


_SEARCH_BATCH = 500


def m009_task_reference(conn: Connection) -> None:
    """What each planned task expects: `run_tasks.reference` (its known-good answer) and
    `run_tasks.criteria` (its success criteria), for the viewer's trial page. Rows written
    before stay NULL in both."""
    run_tasks = Table("run_tasks", MetaData(), Column("reference", Text), Column("criteria", Text))
    for column in run_tasks.columns:
        conn.exec_driver_sql(add_column_sql(conn.dialect, column))


def m010_trial_ends(conn: Connection) -> None:
    """`trials.ended_at`: a trial's start plus its duration (to the microsecond, as Python adds
    them), so that reports take a task's wall span and the viewer its finish order from an
    index. `ix_trials_task_span` replaces `ix_trials_task_duration`: per task, the durations in
    order (percentiles) with the start, end and costs beside them, so a report reads every
    figure of a big task in one pass over an index. `ix_trials_run_ended` orders a run's trials
    by their end. Rows written before get their end from their start and duration."""
    md = MetaData()
    trials = Table(
        "trials",
        md,
        *(Column(name, String) for name in ("run_id", "task_id", "started_at")),
        Column("idx", Integer),
        *(Column(name, Float) for name in ("duration_s", "cost_usd", "grader_cost_usd")),
        Column("ended_at", String(32)),
    )
    c = trials.c
    conn.exec_driver_sql(add_column_sql(conn.dialect, c.ended_at))
    key = (c.run_id, c.task_id, c.idx)
    update = (
        trials.update()
        .where(*(k == bindparam(f"k_{k.name}") for k in key))
        .values(ended_at=bindparam("end"))
    )
    last: tuple[Any, ...] | None = None
    while True:  # by key, in batches, as m003 does
        page = select(*key, c.started_at, c.duration_s).order_by(*key)
        if last is not None:
            page = page.where(tuple_(*key) > tuple_(*(literal(v) for v in last)))
        rows = conn.execute(page.limit(_BACKFILL_BATCH)).all()
        if not rows:
            break
        last = tuple(rows[-1][:3])
        changes = [
            {f"k_{k.name}": v for k, v in zip(key, row[:3], strict=True)}
            | {"end": trial_end(row.started_at, row.duration_s)}
            for row in rows
        ]
        conn.execute(update, changes)
    conn.execute(DropIndex(Index("ix_trials_task_duration", c.run_id, c.task_id, c.duration_s)))
    span = (c.duration_s, c.started_at, c.ended_at, c.cost_usd, c.grader_cost_usd)
    conn.execute(CreateIndex(Index("ix_trials_task_span", c.run_id, c.task_id, *span)))
    conn.execute(CreateIndex(Index("ix_trials_run_ended", c.run_id, c.ended_at, c.task_id, c.idx)))


def m011_kept_reports(conn: Connection) -> None:
    """`run_reports`: a finished run's report, kept beside it under the version of the run it
    was made from, so a big run's report is read, not computed, until the run changes. Runs
    stored before have none: theirs is computed when asked for."""
    md = MetaData()
    Table("runs", md, Column("id", String, primary_key=True))
    table = Table(
        "run_reports",
        md,
        Column("run_id", String, primary_key=True),
        Column("version", Text, nullable=False),
        Column("report", Text, nullable=False),
        Column("report_packed", LargeBinary),
        Column("figures", Text),
        ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    )
    table.create(conn)


def m012_grader_error_index(conn: Connection) -> None:
    """`ix_scores_errors`: a partial index of the scores that errored (by run, task, grader
    and trial), so `trialkit health` and the trend page find graders' errors without reading
    every score of a run. Small, since errors are rare, and cheap to keep."""
    scores = Table(
        "scores",
        MetaData(),
        *(Column(name, String) for name in ("run_id", "task_id", "name", "verdict")),
        Column("trial_idx", Integer),
    )
    c = scores.c
    where = text("verdict = 'error'")
    index = Index(
        "ix_scores_errors",
        *(c.run_id, c.task_id, c.name, c.trial_idx),
        sqlite_where=where,
        postgresql_where=where,
    )
    conn.execute(CreateIndex(index))


def m013_search_batch_index(conn: Connection) -> None:
    """SQLite: documents are indexed by the statement that saves them, one per batch of trials
    (`search_index.save_documents`), not by `search_docs_ai`, a trigger run for each row,
    which cost four times as much; the trigger is dropped. PostgreSQL's index is unchanged."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {search_index.SQLITE_INSERT_TRIGGER}")


def m014_task_trials(conn: Connection) -> None:
    """How many trials each planned task was to run: `run_tasks.trials`, so that a finished
    run can tell a trial that never finished (its process crashed) from one never planned.
    NULL in rows written before, and for a task whose trials were adaptive (at most)."""
    run_tasks = Table("run_tasks", MetaData(), Column("trials", Integer))
    conn.exec_driver_sql(add_column_sql(conn.dialect, run_tasks.c.trials))


def m015_trial_attempts(conn: Connection) -> None:
    """Which attempt a stored trial is: `trials.attempt`, 2 or more for a trial run again after
    an error (`--resume RUN --retry-errors`). NULL for a first attempt, and in rows before."""
    trials = Table("trials", MetaData(), Column("attempt", Integer))
    conn.exec_driver_sql(add_column_sql(conn.dialect, trials.c.attempt))


def m016_trial_sandbox(conn: Connection) -> None:
    """Which sandbox ran a stored trial, and its policy: `trials.sandbox`, the JSON of its
    `SandboxRecord`. NULL when nothing of the trial ran in a sandbox, and in rows before."""
    trials = Table("trials", MetaData(), Column("sandbox", Text))
    conn.exec_driver_sql(add_column_sql(conn.dialect, trials.c.sandbox))


def trial_end(started_at: str, duration_s: float) -> str | None:
    """The stored end of a trial that started at `started_at` (stored text) and took
    `duration_s`; `None` when the two cannot be added (a duration out of range)."""
    try:
        end = datetime.fromisoformat(started_at) + timedelta(seconds=duration_s)
    except (ValueError, OverflowError):
        return None
    return end.astimezone(UTC).isoformat(timespec="microseconds")


def add_column_sql(dialect: Dialect, column: Column[Any]) -> str:
    """`ALTER TABLE … ADD COLUMN …`, which SQLite and PostgreSQL both run in place for a
    nullable column, or a NOT NULL one with a constant default; the column is rendered by the
    dialect, as CREATE TABLE would.

    Shipped migrations call it: change it only in ways that leave their SQL as it is."""
    table = dialect.identifier_preparer.format_table(column.table)
    spec = CreateColumn(column).compile(dialect=dialect)
    return f"ALTER TABLE {table} ADD COLUMN {spec}"


MIGRATIONS: Sequence[Migration] = (
    m001_initial,
    m002_grader_usage,
    m003_usage_columns,
    m004_packed_payloads,
    m005_report_indexes,
    m006_labels,
    m007_task_source,
    m008_search,
    m009_task_reference,
    m010_trial_ends,
    m011_kept_reports,
    m012_grader_error_index,
    m013_search_batch_index,
    m014_task_trials,
    m015_trial_attempts,
    m016_trial_sandbox,
)
"""Every migration, in the order they apply. Append only."""


def migrate(
    engine: Engine,
    *,
    where: str,
    migrations: Sequence[Migration] = MIGRATIONS,
    create: bool = True,
) -> None:
    """Apply the migrations `engine`'s database has not recorded yet.

    `where` names the store in messages. Cheap when nothing is pending: one read, no lock.
    Without `create`, a database that holds no store yet is an error, and is left as it is.
    """
    names = [m.__name__ for m in migrations]
    with engine.connect() as conn:
        applied = _applied(conn)
    if not applied and not create:
        raise StoreError(
            f"no store at {where}: nothing was run with it yet (`trialkit run` makes it)"
        )
    _check_known(applied, names, where)
    if set(names) <= applied:
        return
    with engine.execution_options(**{WRITE_OPTION: True}).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        schema.migrations.create(conn, checkfirst=True)
        applied = _applied(conn)  # again, now under the lock: another process may have migrated
        _check_known(applied, names, where)
        for migration in migrations:
            if migration.__name__ in applied:
                continue
            migration(conn)
            conn.execute(
                schema.migrations.insert().values(
                    name=migration.__name__,
                    applied_at=datetime.now(UTC).isoformat(timespec="microseconds"),
                )
            )


def applied_migrations(conn: Connection) -> list[str]:
    """The names of the recorded migrations, in the order they were applied."""
    if not inspect(conn).has_table(schema.migrations.name):
        return []
    table = schema.migrations
    rows = conn.execute(select(table.c.name).order_by(table.c.applied_at, table.c.name))
    return list(rows.scalars())


def _applied(conn: Connection) -> set[str]:
    return set(applied_migrations(conn))


def _check_known(applied: set[str], known: list[str], where: str) -> None:
    unknown = sorted(applied - set(known))
    if unknown:
        raise StoreError(
            f"the store {where} was written by a newer trialkit (unknown migrations: "
            f"{', '.join(unknown)}); upgrade trialkit to use it"
        )
