"""Records to rows and back: what `Store` writes and reads, kept apart from the queries."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

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
from trialkit.secrets import redact, redact_json
from trialkit.store.encoding import pack_json, unpack_json
from trialkit.store.errors import StoreError
from trialkit.store.schema import TOKEN_COLUMNS
from trialkit.transcript import Transcript, Usage
from trialkit.trial import TRIAL_SCHEMA_VERSION, SandboxRecord, Trial, TrialStatus

RUN_SCHEMA_VERSION = TRIAL_SCHEMA_VERSION
"""Recorded on each run: the version of the trial records written under it."""

StoredRow = Any
"""A result row (typed loosely: `Row`'s type parameters differ between SQLAlchemy 2.0 and 2.1)."""

_T = TypeVar("_T")

CORRUPTION_ERRORS: tuple[type[Exception], ...] = (
    ValueError,  # invalid JSON, UTF-8, enum value, timestamp; pydantic's ValidationError
    TypeError,
    KeyError,
    OverflowError,
    zlib.error,
)
"""What decoding a row that was changed behind trialkit's back raises."""


def describe_corruption(exc: BaseException) -> str:
    """One line on what is wrong with a stored value."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        first = errors[0]
        where = ".".join(str(part) for part in first["loc"])
        text = f"{where}: {first['msg']}" if where else str(first["msg"])
        if len(errors) > 1:
            text += f" (and {len(errors) - 1} more)"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:199] + "…"


@contextmanager
def decoding(what: str, column: str | None = None) -> Iterator[None]:
    """Turns a stored value that cannot be read into one `StoreError` line naming `what` (the
    run, or the run and trial) and the column. Nothing is changed in the store."""
    try:
        yield
    except StoreError:
        raise
    except CORRUPTION_ERRORS as exc:
        place = f"{what}, column {column}" if column else what
        raise StoreError(
            f"{place} is corrupted in the store: {describe_corruption(exc)}"
            " (the store was not changed)"
        ) from exc


def decode_column(what: str, row: StoredRow, column: str, decode: Callable[[Any], _T]) -> _T:
    with decoding(what, column):
        return decode(getattr(row, column))


def _run_label(row: StoredRow, run_id: str | None = None) -> str:
    return f"run {getattr(row, 'id', None) if run_id is None else run_id!r}"


def trial_label(row: StoredRow, run_id: str | None = None) -> str:
    """`run 'ID', trial TASK#INDEX` for a trials row (what it has of them)."""
    run_id = getattr(row, "run_id", None) if run_id is None else run_id
    trial = f"trial {getattr(row, 'task_id', '?')}#{getattr(row, 'idx', '?')}"
    return trial if run_id is None else f"run {run_id!r}, {trial}"


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
        "suite_description": None if suite.description is None else redact(suite.description),
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
        "config": redact_json(_CONFIG.dump_json(run.config).decode()),
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
            "file": plan.file,
            "line": plan.line,
            "reference": None if plan.reference is None else redact(plan.reference),
            "criteria": None if plan.criteria is None else redact(plan.criteria),
            "trials": plan.trials,
        }
        for position, plan in enumerate(plans)
    ]


def run_info(row: StoredRow) -> RunInfo:
    what = _run_label(row)
    data = {
        **run_times(row),
        "id": row.id,
        "name": row.name,
        "status": row.status,
        "config": decode_column(what, row, "config", _CONFIG.validate_json),
    }
    with decoding(what):
        return RunInfo.model_validate(data)


def run_times(row: StoredRow) -> dict[str, datetime | None]:
    """The `started_at` and `finished_at` of a runs row."""
    what = _run_label(row)
    return {
        "started_at": decode_column(what, row, "started_at", load_datetime),
        "finished_at": decode_column(what, row, "finished_at", load_optional_datetime),
    }


def suite_info(row: StoredRow) -> SuiteInfo:
    with decoding(_run_label(row), "suite_kind"):
        return SuiteInfo.model_validate(
            {"id": row.suite_id, "kind": row.suite_kind, "description": row.suite_description}
        )


def load_tags(value: str) -> list[str]:
    return _TAGS.validate_json(value)


def task_plan(row: StoredRow) -> TaskPlan:
    what = f"{_run_label(row, row.run_id)}, task {row.task_id!r}"
    tags = decode_column(what, row, "tags", load_tags)
    with decoding(what):
        return TaskPlan.model_validate(
            {
                "id": row.task_id,
                "kind": row.kind,
                "expect": row.expect,
                "tags": tags,
                "file": row.file,
                "line": row.line,
                "reference": row.reference,
                "criteria": row.criteria,
                "trials": getattr(row, "trials", None),
            }
        )


def trial_row(trial: Trial) -> dict[str, Any]:
    # The output is a column of its own (reports read a preview of it without the outcome).
    # Every string is redacted (trialkit.secrets): no secret reaches the store, however it
    # got into the trial.
    transcript, transcript_packed = pack_json(redact_json(trial.transcript.model_dump_json()))
    outcome, outcome_packed = pack_json(
        redact_json(trial.outcome.model_dump_json(exclude={"output"}))
    )
    output = trial.outcome.output
    return {
        "run_id": trial.run_id,
        "task_id": trial.task_id,
        "idx": trial.index,
        "schema_version": trial.schema_version,
        "status": trial.status.value,
        "verdict": trial.verdict.value,
        "expect": trial.expect,
        "model": trial.model,
        "output": None if output is None else redact(output),
        "failed": trial.outcome.failed,
        "error": None if trial.error is None else redact_json(trial.error.model_dump_json()),
        "duration_s": trial.duration_s,
        "started_at": dump_datetime(trial.started_at, f"the started_at of trial {trial.label}"),
        "ended_at": _ended_at(trial),
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
        "attempt": trial.attempt if trial.attempt > 1 else None,
        "sandbox": None if trial.sandbox is None else trial.sandbox.model_dump_json(),
    }


def _ended_at(trial: Trial) -> str | None:
    """The trial's start plus its duration (what `m010_trial_ends` fills in for older rows)."""
    try:
        end = trial.started_at + timedelta(seconds=trial.duration_s)
    except (ValueError, OverflowError):  # a duration no datetime can hold
        return None
    return end.astimezone(UTC).isoformat(timespec="microseconds")


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
            "rationale": None if score.rationale is None else redact(score.rationale),
            "pending": score.pending,
        }
        for position, score in enumerate(scores)
    ]


def dump_scores(scores: list[Score]) -> str:
    return redact_json(_SCORES.dump_json(scores).decode())


def load_scores(value: str) -> list[Score]:
    return _SCORES.validate_json(value)


def trial(row: StoredRow) -> Trial:
    what = trial_label(row)

    def unpacked(column: str) -> str:
        with decoding(what, column):
            try:
                return unpack_json(getattr(row, column), getattr(row, f"{column}_packed"))
            except StoreError as exc:  # an encoding this trialkit does not know
                raise StoreError(f"{what}, column {column}: {exc}") from None

    outcome = decode_column(
        what, row, "outcome", lambda _: Outcome.model_validate_json(unpacked("outcome"))
    )
    outcome.output = row.output
    transcript = decode_column(
        what, row, "transcript", lambda _: Transcript.model_validate_json(unpacked("transcript"))
    )
    fields = {
        "status": decode_column(what, row, "status", TrialStatus),
        "verdict": decode_column(what, row, "verdict", Verdict),
        "scores": decode_column(what, row, "scores", _SCORES.validate_json),
        "error": decode_column(what, row, "error", _error),
        "usage": decode_column(what, row, "usage", Usage.model_validate_json),
        "grader_usage": decode_column(what, row, "grader_usage", load_grader_usage),
        "started_at": decode_column(what, row, "started_at", load_datetime),
        "sandbox": decode_column(what, row, "sandbox", load_sandbox),
    }
    with decoding(what):
        return Trial(
            schema_version=row.schema_version,
            run_id=row.run_id,
            task_id=row.task_id,
            index=row.idx,
            expect=row.expect,
            model=row.model,
            transcript=transcript,
            outcome=outcome,
            cost_usd=row.cost_usd,
            grader_cost_usd=row.grader_cost_usd,
            duration_s=row.duration_s,
            attempt=getattr(row, "attempt", None) or 1,
            **fields,
        )


def trial_result(row: StoredRow, run_id: str | None = None) -> TrialResult:
    """A report's view of a trial; `row.output` may hold only the start of the output.

    A row changed behind trialkit's back so that it cannot be read (bad JSON, a wrong type,
    an unknown verdict) is an error trial saying which column is wrong and why
    (`unreadable_row`), so that the rest of its run is still reported."""
    try:  # every column at once; only a row that cannot be read is decoded column by column
        return _trial_result(row, _fields(row))
    except CORRUPTION_ERRORS:
        return unreadable_row(row)


STORED_ROW_ERROR = "StoredRowError"
"""The `ErrorInfo.type` of a trial whose stored row cannot be read (see `unreadable_row`)."""

_COLUMN_READERS: dict[str, Callable[[Any], Any]] = {
    "verdict": Verdict,
    "status": TrialStatus,
    "scores": _SCORES.validate_json,
    "error": lambda value: _error(value),
    "usage": Usage.model_validate_json,
    "grader_usage": lambda value: load_grader_usage(value),
    "started_at": lambda value: load_datetime(value),
    "output": lambda value: _text(value),
    "failed": lambda value: as_flag(value),
    "duration_s": lambda value: as_number(value),
    "cost_usd": lambda value: None if value is None else as_number(value),
    "grader_cost_usd": lambda value: None if value is None else as_number(value),
    "sandbox": lambda value: load_sandbox(value),
}
"""How each column a report reads is decoded on its own, for a row that cannot be read whole
(SQLite keeps a value of any type in any column)."""


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{type(value).__name__} where text belongs")


def as_flag(value: Any) -> bool:
    """A boolean column's value, refused when it is none."""
    if isinstance(value, int) and value in (0, 1):  # bool is an int; SQLite's are 0 and 1
        return bool(value)
    raise TypeError(f"{value!r} is not a boolean")


def as_number(value: Any) -> float:
    """A number column's value, refused when it is none (or not finite)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    return float(value)


def unreadable_row(row: StoredRow) -> TrialResult:
    """A trials row that cannot be read, as an error trial: `error` names the first column
    that is wrong and why (`stored row could not be read: scores: Invalid JSON ...`), and what
    could be read is kept. Nothing is changed in the store."""
    problems: list[tuple[str, str]] = []
    fields: dict[str, Any] = {}
    for column, read in _COLUMN_READERS.items():
        if column not in row._mapping:
            continue
        try:
            fields[column] = read(getattr(row, column))
        except CORRUPTION_ERRORS as exc:
            problems.append((column, describe_corruption(exc)))
    index = row.idx
    if not isinstance(index, int) or isinstance(index, bool):
        problems.append(("idx", f"{index!r} is not a trial number"))
        index = -1
    fields["output"] = preview_output(fields.get("output"))
    if not problems:  # each column reads, but not together
        try:
            return TrialResult(trial=index, **fields)
        except CORRUPTION_ERRORS as exc:
            problems.append(("row", describe_corruption(exc)))
    fields.update(verdict=Verdict.ERROR, status=TrialStatus.ERROR, error=unreadable_error(problems))
    return TrialResult(trial=index, **fields)


def unreadable_error(problems: Sequence[tuple[str, str]]) -> ErrorInfo:
    """The error of a trial whose stored row cannot be read: its first wrong column and why,
    then the names of any other wrong columns."""
    column, problem = problems[0]
    message = f"stored row could not be read: {column}: {problem}"
    if len(problems) > 1:
        message += f" (also wrong: {', '.join(column for column, _ in problems[1:])})"
    return ErrorInfo(type=STORED_ROW_ERROR, message=message)


def _fields(row: StoredRow) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "verdict": _VERDICTS.get(row.verdict) or Verdict(row.verdict),
        "status": TrialStatus(row.status),
        "scores": _SCORES.validate_json(row.scores),
        "error": _error(row.error),
        "usage": Usage.model_validate_json(row.usage),
        "grader_usage": load_grader_usage(row.grader_usage),
    }
    if "started_at" in row._mapping:
        fields["started_at"] = load_datetime(row.started_at)
    if "sandbox" in row._mapping:
        fields["sandbox"] = load_sandbox(row.sandbox)
    return fields


_VERDICTS = {v.value: v for v in Verdict}


def _trial_result(row: StoredRow, fields: dict[str, Any]) -> TrialResult:
    return TrialResult(
        trial=row.idx,
        output=preview_output(row.output),
        failed=row.failed,
        duration_s=row.duration_s,
        cost_usd=row.cost_usd,
        grader_cost_usd=row.grader_cost_usd,
        **fields,
    )


def load_sandbox(value: str | None) -> SandboxRecord | None:
    """A `trials.sandbox` value (NULL without a sandbox, and in rows before m016)."""
    return None if value is None else SandboxRecord.model_validate_json(value)


def _error(value: str | None) -> ErrorInfo | None:
    return None if value is None else ErrorInfo.model_validate_json(value)
