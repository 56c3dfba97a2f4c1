"""Reading YAML and JSON files with the line of every key, and naming problems by line.

PyYAML keeps marks on the nodes it composes; `json` keeps none, so JSON documents are walked
once more with the standard library's scanners to find where each key and item starts.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from trialkit.loaders.errors import FieldPath, Problem, format_path
from trialkit.loaders.suite_file.fields import TAG, describe, did_you_mean

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_NODES = 1_000_000
"""More values than this (YAML aliases can multiply a small file) is refused."""
MAX_DEPTH = 100
"""Values nested deeper than this (a list in a mapping in a list ...) are refused: no suite
needs them, and the readers and validators after the parser recurse."""


class _TooBig(Exception):
    pass


class _TooDeep(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


@dataclass
class Document:
    """A parsed file: its data and the line where each key or list item starts."""

    file: str
    """The file's name as the user gave it."""
    data: Any
    lines: dict[FieldPath, int] = field(default_factory=dict)

    def line_of(self, path: FieldPath) -> int | None:
        """The line of `path`, or of the nearest enclosing value whose line is known."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def problem(self, path: FieldPath, message: str) -> Problem:
        shown = user_path(path, self.data)
        return Problem(self.file, self.line_of(shown), format_path(shown), message)

    def validate(
        self, model: type[BaseModel], data: Any, prefix: FieldPath = ()
    ) -> tuple[Any, list[Problem]]:
        """`data` (found at `prefix` in this document) validated as `model`, or the problems."""
        try:
            return model.model_validate(data), []
        except ValidationError as exc:
            return None, [self.problem((*prefix, *loc), msg) for loc, msg in explain(exc)]


def read_text(path: Path, file: str) -> tuple[str | None, list[Problem]]:
    """The UTF-8 text of `path` (a BOM is dropped), or why it cannot be had."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, [Problem(file, None, "", f"cannot read: {exc.strerror or exc}")]
    try:
        return raw.decode("utf-8-sig"), []
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, [Problem(file, line, "", f"not UTF-8 text: {exc.reason}")]


_Parsed = tuple[Document | None, list[Problem]]
_peeked: dict[tuple[str, str, int, int], _Parsed] = {}
"""The one document `peek_document` parsed, until `read_document` takes it."""


def read_document(path: Path, file: str) -> _Parsed:
    """Parse `path` (YAML, or JSON for `.json`); `file` is how problems name it.

    A file `peek_document` has just parsed (unchanged since) is not parsed again.
    """
    key = _stat_key(path, file)
    if key is not None and key in _peeked:
        return _peeked.pop(key)
    return _read_document(path, file)


def peek_document(path: Path) -> Any:
    """The data of `path` for a look at its shape (`None` when it cannot be read), parsed as
    `read_document` parses it, which then takes this parse instead of making another."""
    _peeked.clear()
    key = _stat_key(path, str(path))
    parsed = _read_document(path, str(path))
    if key is not None:
        _peeked[key] = parsed
    doc = parsed[0]
    return None if doc is None else doc.data


def _stat_key(path: Path, file: str) -> tuple[str, str, int, int] | None:
    try:
        stat = path.stat()
        return str(path.resolve()), file, stat.st_mtime_ns, stat.st_size
    except (OSError, RuntimeError):
        return None


def _read_document(path: Path, file: str) -> _Parsed:
    text, problems = read_text(path, file)
    if text is None:
        return None, problems
    parse = _parse_json if path.suffix.lower() == ".json" else _parse_yaml
    try:
        return parse(text, file)
    except _TooDeep as exc:
        return None, [Problem(file, exc.line, "", f"nested more than {MAX_DEPTH} levels deep")]
    except (RecursionError, _TooBig):
        return None, [Problem(file, None, "", "nested too deeply or too large to read")]


def _parse_yaml(text: str, file: str) -> tuple[Document | None, list[Problem]]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        doc = Document(file, None)
        problems: list[Problem] = []
        if node is not None:
            _YamlWalk(doc, problems).walk(node, ())
            doc.data = loader.construct_document(node)
        return doc, problems
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        return None, [Problem(file, line, "", f"not valid YAML: {what}")]
    except (RecursionError, _TooBig, _TooDeep):
        raise
    except Exception as exc:  # PyYAML's constructors raise plain errors, e.g. for 2024-13-01
        return None, [Problem(file, None, "", f"not valid YAML: {exc}")]
    finally:
        loader.dispose()


@dataclass
class _YamlWalk:
    doc: Document
    problems: list[Problem]
    visits: int = 0
    active: set[int] = field(default_factory=set)

    def walk(self, node: yaml.Node, path: FieldPath) -> None:
        self.visits += 1
        if self.visits > MAX_NODES:
            raise _TooBig
        if id(node) in self.active:
            raise yaml.MarkedYAMLError(
                problem="an alias refers to the value that holds it", problem_mark=node.start_mark
            )
        self.doc.lines.setdefault(path, node.start_mark.line + 1)
        if len(path) > MAX_DEPTH:
            raise _TooDeep(node.start_mark.line + 1)
        self.active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            self._mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.walk(item, (*path, i))
        self.active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: FieldPath) -> None:
        first: dict[str, int] = {}
        merged: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged.append(value_node)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key, line = key_node.value, key_node.start_mark.line + 1
            if key in first:
                self.problems.append(
                    Problem(
                        self.doc.file,
                        line,
                        format_path((*path, key)),
                        f"duplicate key (first on line {first[key]})",
                    )
                )
            first.setdefault(key, line)
            self.doc.lines[(*path, key)] = line
            self.walk(value_node, (*path, key))
        for value_node in merged:  # `<<: *base`: the merged keys live where the anchor is
            sources = (
                value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            )
            for source in sources:
                if isinstance(source, yaml.MappingNode):
                    for key_node, inner in source.value:
                        if isinstance(key_node, yaml.ScalarNode):
                            key_path = (*path, key_node.value)
                            self.doc.lines.setdefault(key_path, key_node.start_mark.line + 1)
                            self.walk(inner, key_path)


def reject_constant(name: str) -> Any:
    """For `json`'s `parse_constant`: NaN and infinities are not JSON."""
    raise ValueError(f"{name} is not a JSON number")


_WS = re.compile(r"[ \t\n\r]*")
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]


def _parse_json(text: str, file: str) -> tuple[Document | None, list[Problem]]:
    decoder = json.JSONDecoder(parse_constant=reject_constant)
    try:
        data = decoder.decode(text)
    except json.JSONDecodeError as exc:
        return None, [
            Problem(file, exc.lineno, "", f"not valid JSON: {exc.msg} (column {exc.colno})")
        ]
    except ValueError as exc:
        return None, [Problem(file, None, "", f"not valid JSON: {exc}")]
    doc = Document(file, data)
    return doc, _JsonWalk(text, doc, decoder).run()


class _JsonWalk:
    """Finds the line of every key and item of an already-parsed JSON text."""

    def __init__(self, text: str, doc: Document, decoder: json.JSONDecoder) -> None:
        self.text = text
        self.doc = doc
        self.decoder = decoder
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.problems: list[Problem] = []

    def run(self) -> list[Problem]:
        self.value(self._skip(0), ())
        return self.problems

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def _skip(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        return match.end() if match else pos

    def value(self, pos: int, path: FieldPath) -> int:
        self.doc.lines.setdefault(path, self.line(pos))
        if len(path) > MAX_DEPTH:
            raise _TooDeep(self.line(pos))
        char = self.text[pos]
        if char == "{":
            return self._object(pos, path)
        if char == "[":
            return self._array(pos, path)
        _, end = self.decoder.raw_decode(self.text, pos)
        return int(end)

    def _object(self, pos: int, path: FieldPath) -> int:
        pos = self._skip(pos + 1)
        if self.text[pos] == "}":
            return pos + 1
        first: dict[str, int] = {}
        while True:
            line = self.line(pos)
            key, pos = _scanstring(self.text, pos + 1)
            if key in first:
                self.problems.append(
                    Problem(
                        self.doc.file,
                        line,
                        format_path((*path, key)),
                        f"duplicate key (first on line {first[key]})",
                    )
                )
            first.setdefault(key, line)
            self.doc.lines[(*path, key)] = line
            pos = self._skip(self._skip(pos) + 1)  # past the ':'
            pos = self._skip(self.value(pos, (*path, key)))
            if self.text[pos] == "}":
                return pos + 1
            pos = self._skip(pos + 1)  # past the ','

    def _array(self, pos: int, path: FieldPath) -> int:
        pos = self._skip(pos + 1)
        if self.text[pos] == "]":
            return pos + 1
        index = 0
        while True:
            pos = self._skip(self.value(pos, (*path, index)))
            index += 1
            if self.text[pos] == "]":
                return pos + 1
            pos = self._skip(pos + 1)


def user_path(path: FieldPath, data: Any) -> FieldPath:
    """`path` as the user wrote it in `data`.

    It stops at a plain value written for a mapping (`contains: paris` for
    `contains: {text: paris}`), skips the `[0]` of a single mapping written for a list
    (`dataset: {...}`), and keeps one missing key (the field that is required or unknown).
    """
    shown: list[str | int] = []
    node = data
    for part in path:
        if isinstance(node, dict):
            if part in node:
                shown.append(part)
                node = node[part]
                continue
            if part == 0:  # a single mapping written where a list may be
                continue
            shown.append(part)
            break
        if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            shown.append(part)
            node = node[part]
            continue
        break
    return tuple(shown)


_FIELD_NAMES: set[str] = set()


def _known_fields() -> list[str]:
    if not _FIELD_NAMES:
        from trialkit.loaders.suite_file import agent_specs, grader_specs, judge_specs, models

        for module in (models, grader_specs, agent_specs, judge_specs):
            for value in vars(module).values():
                if isinstance(value, type) and issubclass(value, BaseModel):
                    _FIELD_NAMES.update(n for n in value.model_fields if not n.endswith("_"))
    return sorted(_FIELD_NAMES)


def explain(exc: ValidationError) -> list[tuple[FieldPath, str]]:
    """Each error of `exc` as (path, message), with union tags dropped and plainer words."""
    found: list[tuple[FieldPath, str]] = []
    for error in exc.errors(include_url=False):
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith(TAG)))
        kind, message = error["type"], error["msg"]
        if kind == "extra_forbidden":
            name = loc[-1] if loc else ""
            message = f"unknown field{did_you_mean(name, _known_fields())}"
        elif kind == "missing":
            message = "required field is missing"
        elif kind != "suite_file":
            message = f"{message}, got {describe(error['input'])}"
        found.append((loc, message))
    return found
