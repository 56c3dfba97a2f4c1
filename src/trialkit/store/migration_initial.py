"""The store's first migration: the tables as the first trialkit created them.

In a module of its own so that `migrations.py`, which lists it first, stays readable; like every
shipped migration it is never edited (see `migrations.py`).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)


def m001_initial(conn: Connection) -> None:
    """Runs, their planned tasks, trials, and one row per score."""
    md = MetaData()
    Table(
        "runs",
        md,
        Column("id", String, primary_key=True),
        Column("name", String),
        Column("suite_id", String, nullable=False),
        Column("suite_kind", String, nullable=False),
        Column("suite_description", Text),
        Column("status", String, nullable=False),
        Column("started_at", String(32), nullable=False),
        Column("finished_at", String(32)),
        Column("config", Text, nullable=False),
        Column("schema_version", Integer, nullable=False),
        Index("ix_runs_started_at", "started_at"),
        Index("ix_runs_name", "name", "started_at"),
    )
    Table(
        "run_tasks",
        md,
        Column("run_id", String, primary_key=True),
        Column("task_id", String, primary_key=True),
        Column("position", Integer, nullable=False),
        Column("kind", String, nullable=False),
        Column("expect", String, nullable=False),
        Column("tags", Text, nullable=False),
        ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    )
    Table(
        "trials",
        md,
        Column("run_id", String, primary_key=True),
        Column("task_id", String, primary_key=True),
        Column("idx", Integer, primary_key=True),
        Column("schema_version", Integer, nullable=False),
        Column("status", String, nullable=False),
        Column("verdict", String, nullable=False),
        Column("expect", String, nullable=False),
        Column("model", String),
        Column("output", Text),
        Column("failed", Boolean, nullable=False),
        Column("error", Text),
        Column("duration_s", Float, nullable=False),
        Column("started_at", String(32), nullable=False),
        Column("input_tokens", Integer, nullable=False),
        Column("output_tokens", Integer, nullable=False),
        Column("cost_usd", Float),
        Column("usage", Text, nullable=False),
        Column("transcript", Text, nullable=False),
        Column("outcome", Text, nullable=False),
        Column("scores", Text, nullable=False),
        ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
        Index("ix_trials_run_verdict", "run_id", "verdict"),
    )
    Table(
        "scores",
        md,
        Column("run_id", String, primary_key=True),
        Column("task_id", String, primary_key=True),
        Column("trial_idx", Integer, primary_key=True),
        Column("position", Integer, primary_key=True),
        Column("name", String, nullable=False),
        Column("verdict", String, nullable=False),
        Column("value", Float),
        Column("rationale", Text),
        ForeignKeyConstraint(
            ["run_id", "task_id", "trial_idx"],
            ["trials.run_id", "trials.task_id", "trials.idx"],
            ondelete="CASCADE",
        ),
        Index("ix_scores_run_name", "run_id", "name"),
    )
    md.create_all(conn, checkfirst=False)
