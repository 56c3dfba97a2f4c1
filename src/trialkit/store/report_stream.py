"""A stored run's report in parts, for a writer that streams it (the JSON report): the head
(run, suite, summary, and what decides the gate), then the tasks one at a time, each with the
trials it lists. The whole report is never held, as objects or as text.

A finished run's report is the one kept in the store (`kept_reports`) while the run is as it
was: its packed JSON is read from the database a piece at a time and decoded as it comes, and
the trials the tasks list are read for a batch of tasks at a time. The parts are the
JSON values the report's models dump (`model_dump(mode="json")`): the kept JSON is written by
this version of trialkit (its version is part of the kept one's), so the values are the same.
A run without such a report (still running, kept by another trialkit) is computed as
`Store.load_report` computes it, in memory, and handed over in the same parts.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import AwareDatetime, TypeAdapter
from sqlalchemy import Connection, func, select

from trialkit._record import ErrorInfo
from trialkit.report import MAX_RESULTS_PER_TASK, Report, TaskReport, preview_output
from trialkit.score import Score, Verdict
from trialkit.store import aggregates, kept_reports, rows
from trialkit.store.encoding import ZLIB
from trialkit.store.rows import StoredRow
from trialkit.store.schema import run_reports
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import TrialStatus

if TYPE_CHECKING:
    from trialkit.store.store import Store

TASKS_PER_BATCH = 500
TRIALS_PER_BATCH = 1000
"""A batch of tasks whose listed trials are read together: at most this many tasks, and as
many as list about this many trials."""
_PIECE_BYTES = 64 * 1024
"""Bytes of a packed kept report read from the database at a time."""
_TEXT_BYTES = 64 * 1024
"""Bytes of its JSON decompressed at a time."""
_TASK_FIELDS = tuple(TaskReport.model_fields)


class KeptReportStale(Exception):
    """A trial the kept report lists cannot be read now (its row was changed behind
    trialkit's back): the kept figures no longer count it as the error it is; the report must
    be computed instead (`open_report(..., computed=True)`). Raised while the tasks are read,
    so a writer starts again."""


@dataclass
class ReportParts:
    """A run's report as JSON values: `head` (`schema_version`, `run`, `suite`, `summary`, in
    the report's order), `gate_report` (the report with only the tasks its gate reads) and
    `tasks()`, each task's value with the trials it lists."""

    head: dict[str, Any]
    gate_report: Report
    tasks: Any
    """A callable that iterates over the tasks' JSON values, in the report's order."""


@contextmanager
def open_report(
    store: Store, run_id: str, *, computed: bool = False, max_results: int = MAX_RESULTS_PER_TASK
) -> Iterator[ReportParts]:
    """The report of stored run `run_id` in parts, read in one transaction (`tasks()` is to be
    iterated inside the block). `computed`: do not read the kept report."""
    with store._read(f"load the report of run {run_id!r}") as conn:
        version = None if computed else kept_reports.run_version(conn, run_id)
        head = None if version is None else _kept_head(conn, run_id, version)
        if head is None:
            yield _computed_parts(store, conn, run_id, max_results)
            return
        summary = head["summary"]
        deciding: list[dict[str, Any]] = []
        if summary["failed_tasks"] or summary["unknown_tasks"]:  # else no task decides it
            deciding = [t for t in _kept_tasks(conn, run_id) if _decides_gate(t)]
        gate_report = Report.model_validate({**head, "tasks": deciding})

        def tasks() -> Iterator[dict[str, Any]]:
            yield from _listed(conn, run_id, _kept_tasks(conn, run_id), max_results)

        yield ReportParts(head=head, gate_report=gate_report, tasks=tasks)


def _computed_parts(store: Store, conn: Connection, run_id: str, max_results: int) -> ReportParts:
    report = store._computed_report(conn, run_id, max_results)
    data = report.model_dump(mode="json", exclude={"tasks"})
    head = {name: data[name] for name in ("schema_version", "run", "suite", "summary")}

    def tasks() -> Iterator[dict[str, Any]]:
        for task in report.tasks:
            yield task.model_dump(mode="json")

    return ReportParts(head=head, gate_report=report, tasks=tasks)


def _decides_gate(task: dict[str, Any]) -> bool:
    """Whether the gate reads `task` (`evaluate_gate`: a regression task that did not pass)."""
    return task["kind"] == SuiteKind.REGRESSION.value and task["verdict"] in _NOT_PASSING


_NOT_PASSING = (Verdict.FAIL.value, Verdict.UNKNOWN.value)


def _listed(
    conn: Connection, run_id: str, tasks: Iterator[dict[str, Any]], max_results: int
) -> Iterator[dict[str, Any]]:
    """Each task of `tasks` (kept: listing none) with the trials it lists, in the report's
    field order, a batch of tasks at a time (`TASKS_PER_BATCH`, `TRIALS_PER_BATCH`)."""
    batch: list[dict[str, Any]] = []
    listed = 0
    for task in tasks:
        batch.append(task)
        listed += min(task["trials"], max_results)
        if len(batch) == TASKS_PER_BATCH or listed >= TRIALS_PER_BATCH:
            yield from _with_results(conn, run_id, batch, max_results)
            batch, listed = [], 0
    if batch:
        yield from _with_results(conn, run_id, batch, max_results)


def _with_results(
    conn: Connection, run_id: str, batch: list[dict[str, Any]], max_results: int
) -> Iterator[dict[str, Any]]:
    counts = {task["id"]: task["trials"] for task in batch}
    found = aggregates.listed_rows(conn, run_id, counts, max_results) if max_results else {}
    for task in batch:
        listed = [_result_json(row, run_id) for row in found.get(task["id"], [])]
        task["results"] = listed
        task["results_omitted"] = task["trials"] - len(listed)
        yield {name: task[name] for name in _TASK_FIELDS}


# -- a listed trial's JSON --------------------------------------------------------------------


def _result_json(row: StoredRow, run_id: str) -> dict[str, Any]:
    """`rows.trial_result(row).model_dump(mode="json")`, made without the records where the
    row holds what they would hold (`_fast_result`): the JSON columns of a run's trials
    repeat (the same scores, the same usage), and each is validated and dumped once."""
    fast = _fast_result(row)
    if fast is not None:
        return fast
    result = rows.trial_result(row, run_id)
    if result.error is not None and result.error.type == rows.STORED_ROW_ERROR:
        raise KeptReportStale(f"run {run_id!r}: a trial its kept report lists cannot be read")
    return result.model_dump(mode="json")


def _fast_result(row: StoredRow) -> dict[str, Any] | None:
    """The JSON value of the row's `TrialResult`, or `None` where a value is not exactly as
    trialkit stores it (the records then decide)."""
    try:
        verdict, status = row.verdict, row.status
        if verdict not in _VERDICTS or status not in _STATUSES:
            return None
        trial, failed, output = row.idx, row.failed, row.output
        if type(trial) is not int or type(failed) is not bool:
            return None
        if output is not None and type(output) is not str:
            return None
        started = rows.load_datetime(row.started_at)
        if started.utcoffset() is None:
            return None
        return {
            "trial": trial,
            "verdict": verdict,
            "status": status,
            "scores": _dumped(_SCORES_JSON, row.scores),
            "output": preview_output(output),
            "failed": failed,
            "error": None if row.error is None else _dumped(_ERROR_JSON, row.error, keep=False),
            "duration_s": _float(row.duration_s),
            "started_at": _TIME.dump_python(started, mode="json"),
            "usage": _dumped(_USAGE_JSON, row.usage),
            "grader_usage": _dumped(_USAGE_JSON, row.grader_usage or _NO_USAGE),
            "cost_usd": None if row.cost_usd is None else _float(row.cost_usd),
            "grader_cost_usd": None if row.grader_cost_usd is None else _float(row.grader_cost_usd),
            "sandbox": _sandbox_json(row),
        }
    except _NOT_FAST:
        return None


def _sandbox_json(row: StoredRow) -> Any:
    value = row._mapping.get("sandbox")
    if value is None:
        return None
    record = rows.load_sandbox(value)
    return None if record is None else record.model_dump(mode="json")


class _NotAsStored(Exception):
    """A value that is not as trialkit stores it."""


_NOT_FAST: tuple[type[Exception], ...] = (*rows.CORRUPTION_ERRORS, _NotAsStored)


def _float(value: Any) -> float:
    """A float field's value as its record keeps it (a whole number becomes a float)."""
    if type(value) is float and math.isfinite(value):
        return value
    if type(value) is int:
        return float(value)
    raise _NotAsStored


def _dumped(adapter: TypeAdapter[Any], text: Any, *, keep: bool = True) -> Any:
    """The JSON value of the record stored as `text`, validated and dumped once per short
    text (`keep`: one that repeats from trial to trial)."""
    if type(text) is not str:
        raise _NotAsStored
    key = (id(adapter), text)
    found = _DUMPED.get(key)
    if found is None:
        found = adapter.dump_python(adapter.validate_json(text), mode="json")
        if keep and len(text) <= _KEPT_CHARS:
            if len(_DUMPED) >= _DUMPED_MOST:
                _DUMPED.clear()
            _DUMPED[key] = found
    return found


_VERDICTS = frozenset(v.value for v in Verdict)
_STATUSES = frozenset(s.value for s in TrialStatus)
_SCORES_JSON: TypeAdapter[list[Score]] = TypeAdapter(list[Score])
_USAGE_JSON: TypeAdapter[Usage] = TypeAdapter(Usage)
_ERROR_JSON: TypeAdapter[ErrorInfo] = TypeAdapter(ErrorInfo)
_TIME: TypeAdapter[datetime] = TypeAdapter(AwareDatetime)
_NO_USAGE = Usage().model_dump_json()
_DUMPED: dict[tuple[int, str], Any] = {}
_DUMPED_MOST = 1024
_KEPT_CHARS = 2048
"""JSON texts kept with their dumped values (the few a run's trials repeat): at most
`_DUMPED_MOST` of them, each of at most `_KEPT_CHARS` characters."""


# -- the kept report's JSON, read as it comes ------------------------------------------------


def _kept_head(conn: Connection, run_id: str, version: str) -> dict[str, Any] | None:
    """The kept report's values before its tasks, or `None` when there is no kept report of
    the run as it is, or it cannot be read (it is then computed, as `read_kept` does)."""
    kept = _kept_json(conn, run_id, version)
    if kept is None:
        return None
    try:
        head: dict[str, Any] = {}
        for key, reader in _members(kept):
            if key == "tasks":
                break
            head[key] = reader.value()
        return {name: head[name] for name in ("schema_version", "run", "suite", "summary")}
    except (ValueError, KeyError, zlib.error):
        return None


def _kept_tasks(conn: Connection, run_id: str) -> Iterator[dict[str, Any]]:
    """The kept report's tasks (as kept: listing no trials), read from the start again."""
    kept = _kept_json(conn, run_id, None)
    assert kept is not None  # read in the transaction that found it
    for key, reader in _members(kept):
        if key == "tasks":
            yield from reader.items()
            return
        reader.value()


def _kept_json(conn: Connection, run_id: str, version: str | None) -> _Reader | None:
    """A reader of the kept report's JSON text (of `version`, when given)."""
    row = conn.execute(
        select(
            run_reports.c.version,
            run_reports.c.report,
            func.length(run_reports.c.report_packed).label("packed_bytes"),
        ).where(run_reports.c.run_id == run_id)
    ).one_or_none()
    if row is None or (version is not None and row.version != version):
        return None
    if row.packed_bytes is None:
        return _Reader(iter([row.report]))
    return _Reader(_unpacked(conn, run_id, int(row.packed_bytes)))


def _unpacked(conn: Connection, run_id: str, size: int) -> Iterator[str]:
    """The packed report's text, read `_PIECE_BYTES` at a time and decompressed as it is
    read, `_TEXT_BYTES` at most at a time (a piece of compressed JSON is many times that)."""
    inflate = zlib.decompressobj()
    text = codecs.getincrementaldecoder("utf-8")()
    for start in range(1, size + 1, _PIECE_BYTES):  # SQL counts from 1
        read = select(func.substr(run_reports.c.report_packed, start, _PIECE_BYTES))
        piece = bytes(conn.scalar(read.where(run_reports.c.run_id == run_id)) or b"")
        if start == 1:
            if piece[:1] != ZLIB:
                raise ValueError(f"unknown packed encoding {piece[:1]!r}")
            piece = piece[1:]
        while piece:
            yield text.decode(inflate.decompress(piece, _TEXT_BYTES))
            piece = inflate.unconsumed_tail
    while not inflate.eof:
        out = inflate.decompress(b"", _TEXT_BYTES)
        if not out:
            break
        yield text.decode(out)
    yield text.decode(inflate.flush(), final=True)


def _members(reader: _Reader) -> Iterator[tuple[str, _Reader]]:
    """The keys of the top-level object, each with the reader placed at its value (which
    the caller reads, or reads item by item, before asking for the next key)."""
    reader.expect("{")
    if reader.peek() == "}":
        return
    while True:
        key = reader.value()
        if not isinstance(key, str):
            raise ValueError("a key that is no string")
        reader.expect(":")
        yield key, reader
        if reader.peek() == "}":
            return
        reader.expect(",")


_SPACE = re.compile(r"[ \t\n\r]*")


class _Reader:
    """JSON values read one after another from text that comes in pieces: only the piece
    being read and what is left of the one before are held."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self._text = ""
        self._at = 0
        self._decoder = json.JSONDecoder()

    def _more(self) -> bool:
        for piece in self._pieces:
            if piece:
                self._text = self._text[self._at :] + piece
                self._at = 0
                return True
        return False

    def peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            self._at = _SPACE.match(self._text, self._at).end()  # type: ignore[union-attr]
            if self._at < len(self._text) or not self._more():
                return self._text[self._at : self._at + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} in the kept report")
        self._at += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._at)
            except json.JSONDecodeError:
                if self._more():
                    continue
                raise
            if end == len(self._text) and self._more():  # a number may go on in the next piece
                continue
            self._at = end
            return value

    def items(self) -> Iterator[Any]:
        """The values of the array that comes next, one at a time."""
        self.expect("[")
        if self.peek() == "]":
            self._at += 1
            return
        while True:
            yield self.value()
            if self.peek() == "]":
                self._at += 1
                return
            self.expect(",")
