"""Records to rows and back: what `Store` writes and reads, kept apart from the queries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from trialkit._record import ErrorInfo
from trialkit.outcome import Outcome
from trialkit.report import (
    RunInfo,
    SuiteInfo,
    TaskPlan,
    TrialResult,
    preview_output,
)
from trialkit.score import Score, Verdict
from trialkit.store.encoding import pack_json, unpack_json
from trialkit.store.errors import StoreError
from trialkit.store.schema import TOKEN_COLUMNS
from trialkit.transcript import Transcript, Usage
from trialkit.trial import TRIAL_SCHEMA_VERSION, Trial, TrialStatus

RUN_SCHEMA_VERSION = TRIAL_SCHEMA_VERSION
"""Recorded on each run: the version of the trial records written under it."""

StoredRow = Any
"""A result row (typed loosely: `Row`'s type parameters differ between SQLAlchemy 2.0 and 2.1)."""

_SCORES = TypeAdapter(list[Score])
_TAGS = TypeAdapter(list[str])
_CONFIG = TypeAdapter(dict[str, Any])


def dump_datetime(value: datetime, what: str) -> str:
    """UTC ISO text; a naive datetime is refused, since its time zone would be a guess."""
    if value.utcoffset() is None:
        raise StoreError(f"{what} is a naive datetime; trialkit stores timezone-aware datetimes")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def load_datetime(value: str) -> datetime:
    return datetime.fromisoformat(value)


def load_optional_datetime(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def run_row(run: RunInfo, suite: SuiteInfo) -> dict[str, Any]:
    return {
        "id": run.id,
        "name": run.name,
        "suite_id": suite.id,
        "suite_kind": suite.kind.value,
        "suite_description": suite.description,
        "schema_version": RUN_SCHEMA_VERSION,
        "started_at": dump_datetime(run.started_at, f"the started_at of run {run.id!r}"),
        **run_update(run),
    }


def run_update(run: RunInfo) -> dict[str, Any]:
    """The columns a run changes when it ends: status, `finished_at` and config."""
    finished = run.finished_at
    return {
        "status": run.status,
        "finished_at": None
        if finished is None
        else dump_datetime(finished, f"the finished_at of run {run.id!r}"),
        "config": _CONFIG.dump_json(run.config).decode(),
    }


def task_rows(run_id: str, plans: Sequence[TaskPlan]) -> list[dict[str, Any]]:
    return [
        {
            "run_id": run_id,
            "task_id": plan.id,
            "position": position,
            "kind": plan.kind.value,
            "expect": plan.expect,
            "tags": _TAGS.dump_json(plan.tags).decode(),
        }
        for position, plan in enumerate(plans)
    ]


def run_info(row: StoredRow) -> RunInfo:
    return RunInfo.model_validate(
        {
            "id": row.id,
            "name": row.name,
            "started_at": load_datetime(row.started_at),
            "finished_at": load_optional_datetime(row.finished_at),
            "status": row.status,
            "config": _CONFIG.validate_json(row.config),
        }
    )


def suite_info(row: StoredRow) -> SuiteInfo:
    return SuiteInfo.model_validate(
        {"id": row.suite_id, "kind": row.suite_kind, "description": row.suite_description}
    )


def load_tags(value: str) -> list[str]:
    return _TAGS.validate_json(value)


def task_plan(row: StoredRow) -> TaskPlan:
    return TaskPlan.model_validate(
        {
            "id": row.task_id,
            "kind": row.kind,
            "expect": row.expect,
            "tags": load_tags(row.tags),
        }
    )


def trial_row(trial: Trial) -> dict[str, Any]:
    # The output is a column of its own (reports read a preview of it without the outcome).
    transcript, transcript_packed = pack_json(trial.transcript.model_dump_json())
    outcome, outcome_packed = pack_json(trial.outcome.model_dump_json(exclude={"output"}))
    return {
        "run_id": trial.run_id,
        "task_id": trial.task_id,
        "idx": trial.index,
        "schema_version": trial.schema_version,
        "status": trial.status.value,
        "verdict": trial.verdict.value,
        "expect": trial.expect,
        "model": trial.model,
        "output": trial.outcome.output,
        "failed": trial.outcome.failed,
        "error": None if trial.error is None else trial.error.model_dump_json(),
        "duration_s": trial.duration_s,
        "started_at": dump_datetime(trial.started_at, f"the started_at of trial {trial.label}"),
        "input_tokens": trial.usage.input_tokens,
        "output_tokens": trial.usage.output_tokens,
        "cost_usd": trial.cost_usd,
        "usage": trial.usage.model_dump_json(),
        "transcript": transcript,
        "outcome": outcome,
        "scores": dump_scores(trial.scores),
        "grader_usage": dump_grader_usage(trial.grader_usage),
        "grader_cost_usd": trial.grader_cost_usd,
        **token_columns(trial.usage, trial.grader_usage),
        "transcript_packed": transcript_packed,
        "outcome_packed": outcome_packed,
    }


def token_columns(usage: Usage, grader_usage: Usage) -> dict[str, int]:
    """The `TOKEN_COLUMNS` of a trial: its usage fields, then its graders' (`grader_*`)."""
    agent, graders = usage.model_dump(), grader_usage.model_dump()
    return {
        column: graders[column[7:]] if column.startswith("grader_") else agent[column]
        for column in TOKEN_COLUMNS
    }


def dump_grader_usage(usage: Usage) -> str | None:
    """NULL when the graders used no tokens, as in the rows written before the column."""
    return None if usage.is_empty() else usage.model_dump_json()


def load_grader_usage(value: str | None) -> Usage:
    return Usage() if value is None else Usage.model_validate_json(value)


def score_rows(trial: Trial) -> list[dict[str, Any]]:
    return scores_of(trial.run_id, trial.task_id, trial.index, trial.scores)


def scores_of(run_id: str, task_id: str, index: int, scores: list[Score]) -> list[dict[str, Any]]:
    """The `scores` rows of one trial, in its scores' order."""
    return [
        {
            "run_id": run_id,
            "task_id": task_id,
            "trial_idx": index,
            "position": position,
            "name": score.name,
            "verdict": score.verdict.value,
            "value": score.value,
            "rationale": score.rationale,
            "pending": score.pending,
        }
        for position, score in enumerate(scores)
    ]


def dump_scores(scores: list[Score]) -> str:
    return _SCORES.dump_json(scores).decode()


def load_scores(value: str) -> list[Score]:
    return _SCORES.validate_json(value)


def trial(row: StoredRow) -> Trial:
    outcome = Outcome.model_validate_json(unpack_json(row.outcome, row.outcome_packed))
    outcome.output = row.output
    return Trial(
        schema_version=row.schema_version,
        run_id=row.run_id,
        task_id=row.task_id,
        index=row.idx,
        status=TrialStatus(row.status),
        verdict=Verdict(row.verdict),
        expect=row.expect,
        model=row.model,
        transcript=Transcript.model_validate_json(
            unpack_json(row.transcript, row.transcript_packed)
        ),
        outcome=outcome,
        scores=_SCORES.validate_json(row.scores),
        error=_error(row.error),
        usage=Usage.model_validate_json(row.usage),
        grader_usage=load_grader_usage(row.grader_usage),
        cost_usd=row.cost_usd,
        grader_cost_usd=row.grader_cost_usd,
        started_at=load_datetime(row.started_at),
        duration_s=row.duration_s,
    )


def trial_result(row: StoredRow) -> TrialResult:
    """A report's view of a trial; `row.output` may hold only the start of the output."""
    output = preview_output(row.output)
    return TrialResult(
        trial=row.idx,
        verdict=Verdict(row.verdict),
        status=TrialStatus(row.status),
        scores=_SCORES.validate_json(row.scores),
        output=output,
        failed=row.failed,
        error=_error(row.error),
        duration_s=row.duration_s,
        usage=Usage.model_validate_json(row.usage),
        grader_usage=load_grader_usage(row.grader_usage),
        cost_usd=row.cost_usd,
        grader_cost_usd=row.grader_cost_usd,
    )


def _error(value: str | None) -> ErrorInfo | None:
    return None if value is None else ErrorInfo.model_validate_json(value)
