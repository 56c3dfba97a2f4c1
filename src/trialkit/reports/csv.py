"""A stored run as CSV: one row per trial, for spreadsheets and pandas.

Columns: `run_id`, `task`, `trial`, `verdict`, `status`, one `score:NAME` per grader (the union
over the run, in the order first seen; empty where a trial has no score of that grader, or its
score has no value), `input_tokens`, `output_tokens`, `total_tokens`, `cost_usd` (agent and
graders), `duration_s`, `model`, `error` (`Type: message`), `output`.

Rows stream from two queries over narrow columns (no transcript or outcome is read), so a run
of any size is written in constant memory. The file is UTF-8 without a byte-order mark.

Two guards, for files that are opened in a spreadsheet:
- **Formula injection.** A text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage
  return (model output, an error message, a task id) would be run as a formula by Excel,
  LibreOffice or Google Sheets. It is written with a leading `'`, which they show as text.
  Numbers are written as they are.
- **Cell size.** Spreadsheets cap a cell at 32,767 characters: an output longer than
  `MAX_CELL_CHARS` is cut and ends with `…[cut: N chars]`. `trialkit transcripts show` has
  the whole of it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from sqlalchemy import and_, func, select

from trialkit._record import ErrorInfo
from trialkit.secrets import redact
from trialkit.store.encoding import SafeText
from trialkit.store.schema import run_tasks, scores, trials

if TYPE_CHECKING:
    from trialkit.store import Store

MAX_CELL_CHARS = 32_000
"""The most characters of an output (or error) in one cell: under spreadsheets' 32,767."""
FIXED_BEFORE = ("run_id", "task", "trial", "verdict", "status")
FIXED_AFTER = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_usd",
    "duration_s",
    "model",
    "error",
    "output",
)
SCORE_PREFIX = "score:"
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_BATCH = 500


def write_csv(store: Store, run_id: str, out: TextIO) -> int:
    """Write the run `run_id` to `out` as CSV (see the module); returns the number of trials."""
    writer = csv.writer(out)
    rows = csv_rows(store, run_id)
    writer.writerow(next(rows))
    count = 0
    for row in rows:
        writer.writerow(row)
        count += 1
    return count


def csv_rows(store: Store, run_id: str) -> Iterator[list[Any]]:
    """The header, then one row per trial in the suite's task order and by trial number."""
    with store._read(f"export run {run_id!r} as CSV") as conn:
        store._run_row(conn, run_id)
        names: dict[str, int] = {}
        for name in conn.scalars(_score_names(run_id)):
            names.setdefault(name, len(names))
        yield [*FIXED_BEFORE, *(SCORE_PREFIX + redact(name) for name in names), *FIXED_AFTER]
        current: list[Any] | None = None
        key: tuple[str, int] | None = None
        for row in conn.execute(_trial_rows(run_id)):
            if (row.task_id, row.idx) != key:
                if current is not None:
                    yield current
                key = (row.task_id, row.idx)
                current = _trial_cells(row, len(names))
            if row.score_name is not None and current is not None:
                cell = len(FIXED_BEFORE) + names[row.score_name]
                if current[cell] == "":  # a name twice in one trial: its first score
                    current[cell] = "" if row.score_value is None else row.score_value
        if current is not None:
            yield current


def _order() -> tuple[Any, ...]:
    return (run_tasks.c.position, trials.c.task_id, trials.c.idx)


def _joined() -> Any:
    return trials.outerjoin(
        run_tasks,
        and_(run_tasks.c.run_id == trials.c.run_id, run_tasks.c.task_id == trials.c.task_id),
    )


def _score_names(run_id: str) -> Any:
    """Every score's name, in the order rows are written (distinct names kept in Python)."""
    return (
        select(scores.c.name)
        .select_from(
            scores.join(
                trials,
                and_(
                    trials.c.run_id == scores.c.run_id,
                    trials.c.task_id == scores.c.task_id,
                    trials.c.idx == scores.c.trial_idx,
                ),
            ).outerjoin(
                run_tasks,
                and_(
                    run_tasks.c.run_id == scores.c.run_id, run_tasks.c.task_id == scores.c.task_id
                ),
            )
        )
        .where(scores.c.run_id == run_id)
        .order_by(*_order(), scores.c.position)
        .execution_options(yield_per=_BATCH)
    )


def _trial_rows(run_id: str) -> Any:
    """Each trial's narrow columns, once per score (or once, with no score), in order."""
    score_key = and_(
        scores.c.run_id == trials.c.run_id,
        scores.c.task_id == trials.c.task_id,
        scores.c.trial_idx == trials.c.idx,
    )
    return (
        select(
            trials.c.run_id,
            trials.c.task_id,
            trials.c.idx,
            trials.c.verdict,
            trials.c.status,
            trials.c.model,
            func.substr(trials.c.output, 1, MAX_CELL_CHARS + 1, type_=SafeText).label("output"),
            func.length(trials.c.output).label("output_chars"),
            trials.c.error,
            trials.c.duration_s,
            trials.c.input_tokens,
            trials.c.output_tokens,
            trials.c.cost_usd,
            scores.c.name.label("score_name"),
            scores.c.value.label("score_value"),
        )
        .select_from(_joined().outerjoin(scores, score_key))
        .where(trials.c.run_id == run_id)
        .order_by(*_order(), scores.c.position)
        .execution_options(yield_per=_BATCH)
    )


def _trial_cells(row: Any, graders: int) -> list[Any]:
    return [
        text_cell(row.run_id),
        text_cell(row.task_id),
        row.idx,
        row.verdict,
        row.status,
        *([""] * graders),
        row.input_tokens,
        row.output_tokens,
        row.input_tokens + row.output_tokens,
        "" if row.cost_usd is None else row.cost_usd,
        row.duration_s,
        "" if row.model is None else text_cell(row.model),
        _error_cell(row.error),
        _output_cell(row.output, row.output_chars),
    ]


def _error_cell(value: str | None) -> str:
    if value is None:
        return ""
    error = ErrorInfo.model_validate_json(value)
    return text_cell(f"{error.type}: {error.message}", limit=MAX_CELL_CHARS)


def _output_cell(output: str | None, chars: int | None) -> str:
    if output is None:
        return ""
    if len(output) > MAX_CELL_CHARS:
        output = output[:MAX_CELL_CHARS] + f"…[cut: {chars or len(output)} chars]"
    return text_cell(output)


def text_cell(value: str, *, limit: int | None = None) -> str:
    """`value` safe to open in a spreadsheet: no secret, not a formula, at most `limit` long."""
    value = redact(value)
    if limit is not None and len(value) > limit:
        value = value[:limit] + f"…[cut: {len(value)} chars]"
    return "'" + value if value.startswith(_FORMULA_STARTS) else value
