"""Data files of `dataset:` blocks (JSONL, CSV, JSON) and their `{{field}}` templates."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialkit.loaders.errors import FieldPath, Problem
from trialkit.loaders.suite_file.documents import read_document, read_text, reject_constant
from trialkit.loaders.suite_file.fields import TEMPLATE, describe

DATA_SUFFIXES = (".jsonl", ".ndjson", ".csv", ".json")


@dataclass
class Row:
    """One row of a data file."""

    number: int
    """1-based, counting rows (not blank lines or the CSV header)."""
    line: int | None
    """The line the row starts on."""
    values: dict[str, Any]


def read_rows(path: Path, file: str) -> tuple[list[Row], list[Problem]]:
    """The rows of a data file; `file` is how problems name it. Bad rows are problems."""
    suffix = path.suffix.lower()
    if suffix not in DATA_SUFFIXES:
        known = ", ".join(DATA_SUFFIXES)
        return [], [Problem(file, None, "", f"unknown data format {suffix!r} (known: {known})")]
    if suffix == ".json":
        return _json_rows(path, file)
    text, problems = read_text(path, file)
    if text is None:
        return [], problems
    return _csv_rows(text, file) if suffix == ".csv" else _jsonl_rows(text, file)


def _jsonl_rows(text: str, file: str) -> tuple[list[Row], list[Problem]]:
    rows: list[Row] = []
    problems: list[Problem] = []
    count = 0
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        count += 1
        try:
            value = json.loads(line, parse_constant=reject_constant)
        except json.JSONDecodeError as exc:
            problems.append(
                Problem(file, number, "", f"not valid JSON: {exc.msg} (column {exc.colno})")
            )
            continue
        except (ValueError, RecursionError) as exc:
            problems.append(Problem(file, number, "", f"not valid JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            problems.append(
                Problem(file, number, "", f"expected a JSON object, got {_kind(value)}")
            )
            continue
        rows.append(Row(count, number, value))
    return rows, problems


def _json_rows(path: Path, file: str) -> tuple[list[Row], list[Problem]]:
    doc, problems = read_document(path, file)
    if doc is None:
        return [], problems
    if not isinstance(doc.data, list):
        return [], [
            *problems,
            Problem(file, 1, "", f"expected a list of objects, got {_kind(doc.data)}"),
        ]
    rows = []
    for i, value in enumerate(doc.data):
        line = doc.line_of((i,))
        if isinstance(value, dict):
            rows.append(Row(i + 1, line, value))
        else:
            problems.append(
                Problem(file, line, f"[{i}]", f"expected an object, got {_kind(value)}")
            )
    return rows, problems


def _csv_rows(text: str, file: str) -> tuple[list[Row], list[Problem]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[Row] = []
    problems: list[Problem] = []
    try:
        header = next(reader, None)
        if not header:
            return [], [Problem(file, 1, "", "no header row (the first line names the columns)")]
        names = [name.strip() for name in header]
        seen: set[str] = set()
        for position, name in enumerate(names, 1):
            if not name:
                problems.append(Problem(file, 1, "", f"column {position} has no name"))
            elif name in seen:
                problems.append(Problem(file, 1, "", f"duplicate column {name!r}"))
            seen.add(name)
        if problems:
            return [], problems
        end = reader.line_num
        for record in reader:
            start, end = end + 1, reader.line_num
            if not record:
                continue
            number = len(rows) + 1
            if len(record) != len(names):
                problems.append(
                    Problem(
                        file,
                        start,
                        "",
                        f"row {number} has {len(record)} fields; the header has {len(names)}",
                    )
                )
            rows.append(Row(number, start, dict(zip(names, record, strict=False))))
    except csv.Error as exc:
        problems.append(Problem(file, reader.line_num or None, "", f"not valid CSV: {exc}"))
    return ([] if problems else rows), problems


def _kind(value: Any) -> str:
    return "an object" if isinstance(value, dict) else describe(value)


_MISSING = object()


def fill(
    value: Any, row: dict[str, Any], path: FieldPath, missing: list[tuple[FieldPath, str]]
) -> Any:
    """`value` with every `{{field}}` replaced from `row`; missing fields are added to `missing`.

    A string that is exactly one `{{field}}` becomes the field's value as it is; inside longer
    text, non-string values are written as JSON. `{{a.b}}` reaches into nested objects.
    """
    if isinstance(value, str):
        whole = TEMPLATE.fullmatch(value)
        if whole:
            found = lookup(row, whole.group(1))
            if found is _MISSING:
                missing.append((path, whole.group(1)))
                return value
            return found

        def replace(match: re.Match[str]) -> str:
            found = lookup(row, match.group(1))
            if found is _MISSING:
                missing.append((path, match.group(1)))
                return match.group(0)
            return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

        return TEMPLATE.sub(replace, value)
    if isinstance(value, dict):
        return {k: fill(v, row, (*path, k), missing) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, row, (*path, i), missing) for i, v in enumerate(value)]
    return value


def lookup(row: dict[str, Any], name: str) -> Any:
    """`row[name]`, or by a dotted path into nested objects and lists; `_MISSING` if absent."""
    if name in row:
        return row[name]
    node: Any = row
    for part in name.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node
