"""Read-only queries for `compare` and `health`: runs of a suite, the model each run used, and
per-task verdict counts and grader errors, all grouped by the database.

They read the narrow columns and covering indexes (`ix_trials_report`, `ix_scores_run_name`),
never the transcripts, so a window of runs holding millions of trials costs a few grouped
queries, not a scan of wide rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter
from sqlalchemy import Connection, func, literal_column, select

from trialkit.report import TaskPlan
from trialkit.score import Verdict
from trialkit.store.encoding import SafeText
from trialkit.store.schema import run_tasks, runs, scores, trials
from trialkit.task import SuiteKind

if TYPE_CHECKING:
    from trialkit.store import Store

MODEL_SAMPLE = 20
"""How many of a run's first trials are read for its model, when its settings name none."""
EXAMPLE_CHARS = 200
"""How much of an errored grader's rationale is kept as evidence."""
_RUNS_PER_QUERY = 500
_CONFIG = TypeAdapter(dict[str, Any])


@dataclass(frozen=True)
class StoredRun:
    """A run as `health` needs it: who ran it and when, not its trials."""

    id: str
    name: str | None
    suite_id: str
    suite_kind: SuiteKind
    status: str
    started_at: datetime
    config: dict[str, Any]


@dataclass(frozen=True)
class GraderErrors:
    """How many trials of one task of one run a grader errored on, with one of its messages."""

    errors: int
    example: str | None


@contextmanager
def _read(store: Store, action: str) -> Iterator[Connection]:
    # Store has no public connection API; its `_read` gives one read transaction and turns
    # database errors into one-line `StoreError`s (as `store/queries.py` does).
    with store._read(action) as conn:
        yield conn


def latest_suite_id(store: Store) -> str | None:
    """The suite of the run that started last; `None` when the store has no run."""
    query = select(runs.c.suite_id).order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(1)
    with _read(store, "find the latest run") as conn:
        found = conn.scalar(query)
    return None if found is None else str(found)


def suite_runs(store: Store, suite_id: str, last: int) -> list[StoredRun]:
    """The `last` runs of a suite that started last, oldest first."""
    query = (
        select(runs)
        .where(runs.c.suite_id == suite_id)
        .order_by(runs.c.started_at.desc(), runs.c.id.desc())
        .limit(last)
    )
    with _read(store, f"list the runs of suite {suite_id!r}") as conn:
        found = [_stored_run(row) for row in conn.execute(query)]
    return found[::-1]


def known_suites(store: Store) -> list[str]:
    """Every suite id the store has runs of, for the message when one is not found."""
    with _read(store, "list the suites") as conn:
        return sorted(str(s) for s in conn.scalars(select(runs.c.suite_id).distinct()))


def run_models(store: Store, configs: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """The model each run used: its `model` setting, else the model most of its first
    `MODEL_SAMPLE` trials name, else `None` (a harness that is not a model)."""
    found: dict[str, str | None] = {}
    with _read(store, "find the models of runs") as conn:
        for run_id, config in configs.items():
            setting = config.get("model")
            if setting:
                found[run_id] = str(setting)
                continue
            # The first rows by primary key only: a run whose trials name no model is not
            # scanned to its end. `model` comes before the wide columns in a row.
            sample = select(trials.c.model).where(trials.c.run_id == run_id).limit(MODEL_SAMPLE)
            named = Counter(str(m) for m in conn.scalars(sample) if m)
            found[run_id] = named.most_common(1)[0][0] if named else None
    return found


def planned_tasks(store: Store, run_ids: Sequence[str]) -> dict[str, list[TaskPlan]]:
    """The tasks planned for each run, in the suite's order."""
    found: dict[str, list[TaskPlan]] = {run_id: [] for run_id in run_ids}
    c = run_tasks.c  # not the wide columns (tags, reference, criteria)
    query = select(c.run_id, c.task_id, c.kind, c.expect).order_by(c.run_id, c.position)
    kinds = {kind.value: kind for kind in SuiteKind}
    with _read(store, "list the tasks of runs") as conn:
        for chunk in _chunks(run_ids):
            for row in conn.execute(query.where(run_tasks.c.run_id.in_(chunk))):
                # Trusted columns of our own rows: built without validating (a thousand tasks
                # a run, over thirty runs, on a trend page's first view).
                plan = TaskPlan.model_construct(
                    id=row.task_id, kind=kinds[row.kind], expect=row.expect
                )
                found[row.run_id].append(plan)
    return found


def verdict_counts(store: Store, run_ids: Sequence[str]) -> dict[str, dict[str, Counter[Verdict]]]:
    """{run id: {task id: its trials counted by verdict}}, grouped by the database."""
    query = select(
        trials.c.run_id, trials.c.task_id, trials.c.verdict, func.count().label("n")
    ).group_by(trials.c.run_id, trials.c.task_id, trials.c.verdict)
    found: dict[str, dict[str, Counter[Verdict]]] = {run_id: {} for run_id in run_ids}
    with _read(store, "count the verdicts of runs") as conn:
        for chunk in _chunks(run_ids):
            for row in conn.execute(query.where(trials.c.run_id.in_(chunk))):
                counts = found[row.run_id].setdefault(row.task_id, Counter())
                counts[_VERDICTS.get(row.verdict) or Verdict(row.verdict)] += row.n
    return found


_VERDICTS = {v.value: v for v in Verdict}


def grader_errors(
    store: Store, run_ids: Sequence[str]
) -> dict[str, dict[str, dict[str, GraderErrors]]]:
    """{run id: {task id: {grader name: the trials it errored on}}}, where any errored."""
    example = func.min(func.substr(scores.c.rationale, 1, EXAMPLE_CHARS, type_=SafeText))
    query = (
        select(
            scores.c.run_id,
            scores.c.task_id,
            scores.c.name,
            func.count(scores.c.trial_idx.distinct()).label("n"),
            example.label("example"),
        )
        # Written out, not bound: a partial index (`ix_scores_errors`) is used only when the
        # query states its condition.
        .where(scores.c.verdict == literal_column(f"'{Verdict.ERROR.value}'"))
        .group_by(scores.c.run_id, scores.c.task_id, scores.c.name)
    )
    found: dict[str, dict[str, dict[str, GraderErrors]]] = {run_id: {} for run_id in run_ids}
    with _read(store, "count the grader errors of runs") as conn:
        for chunk in _chunks(run_ids):
            for row in conn.execute(query.where(scores.c.run_id.in_(chunk))):
                by_grader = found[row.run_id].setdefault(row.task_id, {})
                by_grader[str(row.name)] = GraderErrors(row.n, row.example)
    return found


def _chunks(items: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _RUNS_PER_QUERY):
        yield list(items[start : start + _RUNS_PER_QUERY])


def _stored_run(row: Any) -> StoredRun:
    return StoredRun(
        id=row.id,
        name=row.name,
        suite_id=row.suite_id,
        suite_kind=SuiteKind(row.suite_kind),
        status=row.status,
        started_at=datetime.fromisoformat(row.started_at),
        config=_CONFIG.validate_json(row.config),
    )
