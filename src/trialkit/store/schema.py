"""The store's tables as the latest migration leaves them; queries are written against these.

The migrations in `migrations.py` create and change the real tables. When a migration changes
the schema, change these definitions to match (a test compares the two).

Datetimes are ISO 8601 text in UTC with microseconds (`2025-01-31T12:00:00.000000+00:00`): it
sorts in time order on every database and round-trips exactly. JSON is stored as text.
`trials.outcome` holds the outcome without its `output`, which is the `trials.output` column.
A large transcript or outcome is packed instead (`*_packed`, its text column then empty), and
free text is `SafeText` (see `encoding.py`). The token columns repeat `usage` and
`grader_usage` so that reports add them up in SQL, from the covering index `ix_trials_report`.
`labels` keeps one human reviewer's label per trial and grader (a later one replaces it); the
label is also applied to the trial's score and verdict, which is what reports read.
`search_docs` and `trial_tools` are the search index (m008_search, see `search_index.py`); its
full-text part is the database's own and not declared here: SQLite's FTS5 table `search_fts`
and its triggers, PostgreSQL's GIN index `ix_search_docs_tsv` on an expression.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    false,
    text,
)

from trialkit.store.encoding import SafeText

TOKEN_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "grader_input_tokens",
    "grader_output_tokens",
    "grader_cache_read_tokens",
    "grader_cache_write_tokens",
    "grader_reasoning_tokens",
)
"""`Usage` fields of the agent, then of the graders (prefixed `grader_`), as trial columns."""
REPORT_COLUMNS = (*TOKEN_COLUMNS, "cost_usd", "grader_cost_usd")
"""What reports add up, besides the verdicts: in the covering index `ix_trials_report`."""

SPAN_COLUMNS = ("duration_s", "started_at", "ended_at", "cost_usd", "grader_cost_usd")
"""What reports read per trial of a big task, in the order of `ix_trials_task_span`."""

metadata = MetaData()

migrations = Table(
    "trialkit_migrations",
    metadata,
    Column("name", String, primary_key=True),
    Column("applied_at", String(32), nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", SafeText, primary_key=True),
    Column("name", SafeText),
    Column("suite_id", SafeText, nullable=False),
    Column("suite_kind", String, nullable=False),
    Column("suite_description", SafeText),
    Column("status", String, nullable=False),
    Column("started_at", String(32), nullable=False),
    Column("finished_at", String(32)),
    Column("config", Text, nullable=False),
    Column("schema_version", Integer, nullable=False),
    Index("ix_runs_started_at", "started_at"),
    Index("ix_runs_name", "name", "started_at"),
)

run_tasks = Table(
    "run_tasks",
    metadata,
    Column("run_id", SafeText, primary_key=True),
    Column("task_id", SafeText, primary_key=True),
    Column("position", Integer, nullable=False),
    Column("kind", String, nullable=False),
    Column("expect", String, nullable=False),
    Column("tags", Text, nullable=False),
    ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    # m007_task_source: where the task is defined; NULL in rows written before it.
    Column("file", SafeText),
    Column("line", Integer),
    # m009_task_reference: the task's reference and criteria; NULL in rows written before it.
    Column("reference", SafeText),
    Column("criteria", SafeText),
    # m014_task_trials: the trials the task was to run; NULL in rows written before it, and
    # for adaptive trials.
    Column("trials", Integer),
)

trials = Table(
    "trials",
    metadata,
    Column("run_id", SafeText, primary_key=True),
    Column("task_id", SafeText, primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("schema_version", Integer, nullable=False),
    Column("status", String, nullable=False),
    Column("verdict", String, nullable=False),
    Column("expect", String, nullable=False),
    Column("model", SafeText),
    Column("output", SafeText),
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
    # m002_grader_usage: NULL in rows written before it (and grader_usage NULL when empty).
    Column("grader_usage", Text),
    Column("grader_cost_usd", Float),
    # m003_usage_columns (filled in for rows written before it):
    *(Column(name, Integer, nullable=False, server_default="0") for name in TOKEN_COLUMNS[2:]),
    # m004_packed_payloads:
    Column("transcript_packed", LargeBinary),
    Column("outcome_packed", LargeBinary),
    ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    # m005_report_indexes: what reports and `trialkit runs` read, without the wide rows.
    Index("ix_trials_report", "run_id", "task_id", "verdict", "idx", *REPORT_COLUMNS),
    Index("ix_trials_run_duration", "run_id", "duration_s"),
    # m010_trial_ends (filled in for rows written before it; NULL only for a duration that
    # cannot be added to the start): the span of each task from one index, and the finish order.
    Column("ended_at", String(32)),
    Index("ix_trials_task_span", "run_id", "task_id", *SPAN_COLUMNS),
    Index("ix_trials_run_ended", "run_id", "ended_at", "task_id", "idx"),
    # m015_trial_attempts: 2 or more for a trial run again after an error; NULL for a first.
    Column("attempt", Integer),
    # m016_trial_sandbox: the JSON of the trial's SandboxRecord; NULL without one.
    Column("sandbox", Text),
)

scores = Table(
    "scores",
    metadata,
    Column("run_id", SafeText, primary_key=True),
    Column("task_id", SafeText, primary_key=True),
    Column("trial_idx", Integer, primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("name", SafeText, nullable=False),
    Column("verdict", String, nullable=False),
    Column("value", Float),
    Column("rationale", SafeText),
    ForeignKeyConstraint(
        ["run_id", "task_id", "trial_idx"],
        ["trials.run_id", "trials.task_id", "trials.idx"],
        ondelete="CASCADE",
    ),
    # m006_labels: a score waiting for a human reviewer.
    Column("pending", Boolean, nullable=False, server_default=false()),
    Index("ix_scores_run_name", "run_id", "name"),
    Index("ix_scores_run_task_value", "run_id", "task_id", "value"),
    Index("ix_scores_pending", "run_id", "pending", "task_id", "trial_idx"),
    # m012_grader_error_index: the few scores that errored, for `trialkit health`.
    Index(
        "ix_scores_errors",
        "run_id",
        "task_id",
        "name",
        "trial_idx",
        sqlite_where=text("verdict = 'error'"),
        postgresql_where=text("verdict = 'error'"),
    ),
)

labels = Table(
    "labels",
    metadata,
    Column("run_id", SafeText, primary_key=True),
    Column("task_id", SafeText, primary_key=True),
    Column("trial_idx", Integer, primary_key=True),
    Column("grader", SafeText, primary_key=True),
    Column("verdict", String, nullable=False),
    Column("score", Float),
    Column("reviewer", SafeText),
    Column("labeled_at", String(32), nullable=False),
    Column("comment", SafeText),
    ForeignKeyConstraint(
        ["run_id", "task_id", "trial_idx"],
        ["trials.run_id", "trials.task_id", "trials.idx"],
        ondelete="CASCADE",
    ),
)

# m011_kept_reports: a finished run's report (without listed trials), under the version of the
# run it was made from (`kept_reports.run_version`); packed like transcripts when large.
run_reports = Table(
    "run_reports",
    metadata,
    Column("run_id", SafeText, primary_key=True),
    Column("version", Text, nullable=False),
    Column("report", Text, nullable=False),
    Column("report_packed", LargeBinary),
    Column("figures", Text),
    ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
)

search_docs = Table(
    "search_docs",
    metadata,
    # An INTEGER PRIMARY KEY is SQLite's rowid, which FTS5 refers to (VACUUM keeps it).
    Column("id", Integer, primary_key=True),
    Column("run_id", SafeText, nullable=False),
    Column("task_id", SafeText, nullable=False),
    Column("trial_idx", Integer, nullable=False),
    Column("field", String, nullable=False),
    Column("position", Integer, nullable=False),
    Column("grader", SafeText),
    Column("text", SafeText, nullable=False),
    Column("tags", Text, nullable=False),
    ForeignKeyConstraint(
        ["run_id", "task_id", "trial_idx"],
        ["trials.run_id", "trials.task_id", "trials.idx"],
        ondelete="CASCADE",
    ),
    Index("ix_search_docs_trial", "run_id", "task_id", "trial_idx"),
)

trial_tools = Table(
    "trial_tools",
    metadata,
    Column("run_id", SafeText, primary_key=True),
    Column("task_id", SafeText, primary_key=True),
    Column("trial_idx", Integer, primary_key=True),
    Column("name", SafeText, primary_key=True),
    ForeignKeyConstraint(
        ["run_id", "task_id", "trial_idx"],
        ["trials.run_id", "trials.task_id", "trials.idx"],
        ondelete="CASCADE",
    ),
)
