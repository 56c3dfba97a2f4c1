"""Which importer reads a target: an explicit `evals:`, `inspect:`, `promptfoo:` or `hf:`
prefix, or a file recognised by its shape.

Recognised without a prefix: a promptfoo config (`promptfooconfig*.yaml`, or a YAML/JSON
mapping with `prompts` and `tests` or `providers`), openai/evals samples (`.jsonl` whose
first record has `ideal`), inspect_ai samples (`.jsonl` or a `.json` list whose first record
has `target`; `.csv` with `input` and `target` columns) and Parquet files (Hugging Face).
Anything else is left to the other loaders (`None`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from trialkit.loaders.importers._common import ImportFailed, parse_json
from trialkit.loaders.importers.huggingface import load_hf_dataset
from trialkit.loaders.importers.inspect_samples import load_inspect_samples
from trialkit.loaders.importers.openai_evals import load_openai_evals
from trialkit.loaders.importers.promptfoo import load_promptfoo
from trialkit.task import Suite

if TYPE_CHECKING:
    from trialkit.models.base import Model

Format: TypeAlias = Literal["evals", "inspect", "promptfoo", "hf"]
FORMATS: tuple[Format, ...] = ("evals", "inspect", "promptfoo", "hf")

_LOADERS: dict[Format, Callable[..., Suite]] = {
    "evals": load_openai_evals,
    "inspect": load_inspect_samples,
    "promptfoo": load_promptfoo,
    "hf": load_hf_dataset,
}
_BY_NAME: dict[str, Format] = {name: name for name in FORMATS}
_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".yaml", ".yml", ".parquet")


def load_import_target(target: str, *, model: str | Model | None = None) -> Suite | None:
    """The suite of `target` when it is another tool's file (`FORMAT:path`, or a path whose
    shape `detect_format` recognises); `None` when it is not, so other loaders can try.

    `model` becomes the suite's model (for promptfoo: instead of the config's providers).
    Raises `ImportFailed` (a `SuiteError`) when the file is recognised but has problems.
    """
    explicit = split_prefix(target)
    if explicit is not None:
        kind, path = explicit
        if not path.exists():
            raise ImportFailed(target, [f"{path}: no such file or folder"])
        return _LOADERS[kind](path, model=model)
    return detect_and_load(Path(target), model=model)


def detect_and_load(path: Path, *, model: str | Model | None = None) -> Suite | None:
    """The suite in `path` when its shape is one of the imported formats, else `None`."""
    kind = detect_format(path)
    return None if kind is None else _LOADERS[kind](path, model=model)


def split_prefix(target: str) -> tuple[Format, Path] | None:
    """(`evals`, path) for `evals:path`, and so on; `None` without a known prefix.

    `evals:suite` stays a Python target (module `evals`, attribute `suite`): the rest must
    look like a path (have a data-file suffix or a `/`) or exist.
    """
    prefix, sep, rest = target.partition(":")
    kind = _BY_NAME.get(prefix)
    if not sep or kind is None or not rest:
        return None
    path = Path(rest)
    if path.exists() or "/" in rest or "\\" in rest or rest.lower().endswith(_DATA_SUFFIXES):
        return kind, path
    return None


def detect_format(path: Path) -> Format | None:
    """The format a file looks like, judged by its name and its first record; `None` when it
    is none of them (or is not a readable file)."""
    if not path.is_file():
        return None
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "hf"
    if suffix in (".yaml", ".yml", ".json") and path.stem.lower().startswith("promptfooconfig"):
        return "promptfoo"
    try:
        if suffix == ".jsonl":
            return _record_format(_first_json_line(path))
        if suffix == ".csv":
            return _csv_format(path)
        if suffix in (".yaml", ".yml", ".json"):
            return _document_format(path)
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _first_json_line(path: Path) -> Any:
    with path.open(encoding="utf-8-sig") as lines:
        for count, line in enumerate(lines):
            if count >= 20:
                break
            if line.strip():
                try:
                    return parse_json(line)
                except json.JSONDecodeError:
                    continue
    return None


def _record_format(record: Any) -> Format | None:
    if not isinstance(record, dict) or "input" not in record:
        return None
    if "ideal" in record:
        return "evals"
    if "target" in record or "choices" in record:
        return "inspect"
    return None


def _csv_format(path: Path) -> Format | None:
    with path.open(encoding="utf-8-sig", newline="") as rows:
        header = next(csv.reader(rows), [])
    return "inspect" if {"input", "target"} <= {h.strip() for h in header} else None


def _document_format(path: Path) -> Format | None:
    from trialkit.loaders.suite_file.documents import peek_document

    # Parsed as the suite-file loader parses (the C YAML parser, the same limits), which then
    # takes this parse instead of reading the file again.
    data = peek_document(path)
    if isinstance(data, dict):
        is_promptfoo = "prompts" in data and ({"tests", "providers", "targets"} & set(data))
        return "promptfoo" if is_promptfoo and "tasks" not in data else None
    if isinstance(data, list) and data and path.suffix.lower() == ".json":
        return "inspect" if _record_format(data[0]) == "inspect" else None
    return None
