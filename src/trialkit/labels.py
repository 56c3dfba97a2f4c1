"""Human labels: what a reviewer said about one trial, kept in a JSONL or CSV file.

A label names a trial (`run_id`, `task_id`, `trial`), the grader it is for (`grader`, by
default `human`: the reviewer's own judgement of the trial), a verdict and optionally a score.
A JSONL file holds one JSON object per line; a CSV file has the field names as its header.
A file may hold only one label per (run_id, task_id, trial, grader): a second one is an error,
never a silent override, because two answers to one question need a person to choose.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from trialkit._record import Record
from trialkit.loaders.errors import Problem, format_path

HUMAN = "human"
"""The grader name of a label that is the reviewer's own judgement of the trial."""

LabelKey = tuple[str | None, str, int, str]
"""(run_id, task_id, trial, grader): what a labels file may hold only once."""

_PROBLEMS_SHOWN = 20
_SUFFIXES = (".jsonl", ".csv")
_VERBATIM_COLUMNS = frozenset({"comment"})
"""CSV cells kept as written; the others lose surrounding spaces (spreadsheets add them)."""


class Label(Record):
    """A reviewer's verdict (and score) on one trial, for one grader."""

    run_id: str | None = Field(default=None, min_length=1)
    """The run the trial belongs to; `None` when the file is about one run given elsewhere."""
    task_id: str = Field(min_length=1)
    trial: int = Field(ge=0)
    """The trial's index within its task (0-based, as in `TASK#N`)."""
    grader: str = Field(default=HUMAN, min_length=1)
    """The grader (score name) this label is for; `human` for the reviewer's own judgement."""
    verdict: Literal["pass", "fail", "unknown"]
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    """A number in [0, 1]; when absent, 1.0 for `pass`, 0.0 for `fail`, none for `unknown`."""
    reviewer: str | None = None
    labeled_at: datetime | None = None
    comment: str | None = None

    @model_validator(mode="after")
    def _score_from_verdict(self) -> Label:
        if self.score is None and self.verdict != "unknown":
            self.score = 1.0 if self.verdict == "pass" else 0.0
        return self

    @property
    def key(self) -> LabelKey:
        return (self.run_id, self.task_id, self.trial, self.grader)


LABEL_FIELDS: tuple[str, ...] = tuple(Label.model_fields)
"""The fields of a label, in the order of a CSV header."""


class LabelsError(ValueError):
    """A labels file has problems; `problems` lists every one found, each `file:line: field:
    message`."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        if not self.problems:
            raise ValueError("LabelsError needs at least one problem")
        lines = [str(p) for p in self.problems[:_PROBLEMS_SHOWN]]
        more = len(self.problems) - _PROBLEMS_SHOWN
        if more > 0:
            lines.append(f"… and {more} more problem{'' if more == 1 else 's'}")
        super().__init__("\n".join(lines))


def read_labels(path: str | os.PathLike[str]) -> list[Label]:
    """The labels of a `.jsonl` or `.csv` file, in file order.

    Raises `LabelsError` listing every bad row (file, line and field), including any second
    label for the same (run_id, task_id, trial, grader).
    """
    name = os.fspath(path)
    suffix = Path(name).suffix.lower()
    if suffix not in _SUFFIXES:
        raise LabelsError([Problem(name, None, "", "a labels file ends in .jsonl or .csv")])
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        raise LabelsError([Problem(name, None, "", f"cannot read: {exc.strerror}")]) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise LabelsError([Problem(name, line, "", "not UTF-8 text: save it as UTF-8")]) from None
    problems: list[Problem] = []
    rows = (
        _jsonl_rows(text, name, problems) if suffix == ".jsonl" else _csv_rows(text, name, problems)
    )
    labels: list[Label] = []
    first_line: dict[LabelKey, int] = {}
    for line, row in rows:
        try:
            label = Label.model_validate(row)
        except ValidationError as exc:
            problems.extend(
                Problem(name, line, format_path(error["loc"]), _message(error))
                for error in exc.errors()
            )
            continue
        first = first_line.setdefault(label.key, line)
        if first != line:
            problems.append(
                Problem(name, line, "", f"{_describe(label)} is labeled again (line {first})")
            )
        labels.append(label)
    if problems:
        raise LabelsError(problems)
    return labels


def write_labels(labels: Iterable[Label], path: str | os.PathLike[str]) -> None:
    """Write labels to a `.jsonl` or `.csv` file (by its suffix), atomically: a reader sees the
    old file or the whole new one, never a part."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in _SUFFIXES:
        raise ValueError(f"{os.fspath(path)}: a labels file ends in .jsonl or .csv")
    text = _jsonl_text(labels) if suffix == ".jsonl" else _csv_text(labels)
    _write_atomic(target, text)


# -- reading ------------------------------------------------------------------------------------


def _jsonl_rows(text: str, name: str, problems: list[Problem]) -> Iterator[tuple[int, Any]]:
    # Split on "\n" only: `splitlines` also splits on U+2028 and others, which JSON strings
    # may hold unescaped.
    for line, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(Problem(name, line, "", f"not valid JSON: {exc.msg}"))
            continue
        if not isinstance(row, dict):
            problems.append(Problem(name, line, "", "expected a JSON object, one label per line"))
            continue
        yield line, row


def _csv_rows(text: str, name: str, problems: list[Problem]) -> Iterator[tuple[int, Any]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    while True:
        line = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.append(Problem(name, line, "", f"not valid CSV: {exc}"))
            return
        if not any(cell.strip() for cell in cells):
            continue
        if header is None:
            header = [cell.strip() for cell in cells]
            bad_header = _header_problems(header, name, line)
            if bad_header:
                problems.extend(bad_header)
                return
            continue
        if len(cells) != len(header):
            problems.append(
                Problem(name, line, "", f"{len(cells)} cells, but the header has {len(header)}")
            )
            continue
        row = {}
        for column, cell in zip(header, cells, strict=True):
            value = cell if column in _VERBATIM_COLUMNS else cell.strip()
            if value:
                row[column] = value
        yield line, row


def _header_problems(header: list[str], name: str, line: int) -> list[Problem]:
    fields = ", ".join(LABEL_FIELDS)
    problems = [
        Problem(name, line, column, f"unknown column; the columns are {fields}")
        for column in header
        if column not in LABEL_FIELDS
    ]
    problems.extend(
        Problem(name, line, column, "the column appears twice")
        for column in sorted({c for c in header if header.count(c) > 1})
    )
    required = [field for field, info in Label.model_fields.items() if info.is_required()]
    problems.extend(
        Problem(name, line, column, "required column is missing")
        for column in required
        if column not in header
    )
    return problems


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return f"unknown field; the fields are {', '.join(LABEL_FIELDS)}"
    return str(error["msg"])


def _describe(label: Label) -> str:
    run = "" if label.run_id is None else f"run {label.run_id}, "
    return f"{run}trial {label.task_id}#{label.trial} for grader {label.grader!r}"


# -- writing ------------------------------------------------------------------------------------


def _jsonl_text(labels: Iterable[Label]) -> str:
    return "".join(label.model_dump_json(exclude_none=True) + "\n" for label in labels)


def _csv_text(labels: Iterable[Label]) -> str:
    out = io.StringIO()
    # The default "\r\n" line ends (RFC 4180): with "\n", a lone "\r" in a comment would
    # go unquoted and end the row when read back.
    writer = csv.writer(out)
    writer.writerow(LABEL_FIELDS)
    for label in labels:
        row = label.model_dump(mode="json")
        writer.writerow(["" if row[f] is None else row[f] for f in LABEL_FIELDS])
    return out.getvalue()


def _write_atomic(target: Path, text: str) -> None:
    """A temp file in the same folder, fsynced, then `os.replace`d over the target."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
