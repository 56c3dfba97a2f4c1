"""The tasks × runs matrix of the web viewer, one page of tasks at a time, from SQL.

Per cell: the task's trial counts and verdict in that run (as its report decides it), and the
start of its first trial's output.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, Connection, and_, case, func, select

from trialkit._record import Record
from trialkit.score import Verdict
from trialkit.store.encoding import SafeText
from trialkit.store.queries import _read
from trialkit.store.run_figures import chunks, planned_counts
from trialkit.store.schema import run_tasks, trials
from trialkit.store.store import Store

OUTPUT_CHARS = 500
"""How much of a trial's output a matrix cell holds."""


class MatrixCell(Record):
    passed: int
    trials: int
    verdict: Verdict
    """The task's verdict in that run, as its report says."""
    output: str | None
    """The start of the first trial's output (`OUTPUT_CHARS`, then "…")."""
    output_trial: int | None
    """The number of that trial; `None` when the task has no trial in the run."""


class MatrixRow(Record):
    task_id: str
    cells: list[MatrixCell | None]
    """One per run of `Matrix.run_ids`; `None` where the run did not plan the task."""


class Matrix(Record):
    run_ids: list[str]
    rows: list[MatrixRow]
    total: int
    """Tasks matching the filter, before `offset` and `limit`."""


def matrix(
    store: Store,
    run_ids: Sequence[str],
    *,
    task: str | None = None,
    offset: int = 0,
    limit: int = 100,
) -> Matrix:
    """Tasks × runs: per cell the task's counts, verdict and first output. Tasks are those any
    of the runs planned, in the first run's order (then by id); `task` keeps the ids matching
    a glob (`*`, `?`) or, without one, containing it, in any case."""
    ids = list(dict.fromkeys(run_ids))
    if not ids:
        return Matrix(run_ids=[], rows=[], total=0)
    with _read(store, "read the matrix of runs") as conn:
        where: list[ColumnElement[bool]] = [run_tasks.c.run_id.in_(ids)]
        if task:
            where.append(_task_matches(task))
        in_first = case((run_tasks.c.run_id == ids[0], run_tasks.c.position), else_=None)
        position = func.min(in_first)
        grouped = select(run_tasks.c.task_id).where(*where).group_by(run_tasks.c.task_id)
        total = int(conn.scalar(select(func.count()).select_from(grouped.subquery())) or 0)
        page_query = grouped.order_by(position.is_(None), position, run_tasks.c.task_id)
        task_ids = list(conn.scalars(page_query.offset(offset).limit(limit)))
        counts = planned_counts(conn, ids, task_ids)
        outputs = _first_outputs(conn, ids, task_ids)
    found = []
    for task_id in task_ids:
        cells: list[MatrixCell | None] = []
        for run_id in ids:
            counted = counts[run_id].get(task_id)
            if counted is None:
                cells.append(None)
                continue
            first = outputs.get((run_id, task_id))
            cells.append(
                MatrixCell(
                    passed=counted.verdicts[Verdict.PASS],
                    trials=counted.trials,
                    verdict=counted.verdict(),
                    output=None if first is None else _cut(first[1]),
                    output_trial=None if first is None else first[0],
                )
            )
        found.append(MatrixRow(task_id=task_id, cells=cells))
    return Matrix(run_ids=ids, rows=found, total=total)


def _task_matches(pattern: str) -> ColumnElement[bool]:
    column = func.lower(run_tasks.c.task_id)
    if not any(c in pattern for c in "*?"):
        return column.contains(pattern.lower(), autoescape=True)
    escaped = pattern.lower().replace("/", "//").replace("%", "/%").replace("_", "/_")
    return column.like(escaped.replace("*", "%").replace("?", "_"), escape="/")


def _first_outputs(
    conn: Connection, run_ids: list[str], task_ids: list[str]
) -> dict[tuple[str, str], tuple[int, str | None]]:
    """(run, task): the number and the start of the output of the task's first trial."""
    found: dict[tuple[str, str], tuple[int, str | None]] = {}
    if not task_ids:
        return found
    for chunk in chunks(run_ids):
        first = (
            select(trials.c.run_id, trials.c.task_id, func.min(trials.c.idx).label("idx"))
            .where(trials.c.run_id.in_(chunk), trials.c.task_id.in_(task_ids))
            .group_by(trials.c.run_id, trials.c.task_id)
            .subquery("first_trial")
        )
        preview = 2 * (OUTPUT_CHARS + 1) + 1  # an escaped string is at most twice as long
        query = select(
            trials.c.run_id,
            trials.c.task_id,
            trials.c.idx,
            func.substr(trials.c.output, 1, preview, type_=SafeText).label("output"),
        ).join(
            first,
            and_(
                first.c.run_id == trials.c.run_id,
                first.c.task_id == trials.c.task_id,
                first.c.idx == trials.c.idx,
            ),
        )
        for row in conn.execute(query):
            found[row.run_id, row.task_id] = (row.idx, row.output)
    return found


def _cut(output: str | None) -> str | None:
    if output is not None and len(output) > OUTPUT_CHARS:
        return output[:OUTPUT_CHARS] + "…"
    return output
