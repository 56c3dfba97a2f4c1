"""promptfoo prompts and the files a config refers to (`file://...`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trialkit.loaders.importers._common import Problems, json_kind, read_text
from trialkit.loaders.importers._promptfoo_asserts import FAILED
from trialkit.loaders.importers._promptfoo_parts import (
    Doc,
    YamlPath,
    chat_template,
    json_or_none,
    read_doc,
)

_SCRIPT_SUFFIXES = {".py", ".js", ".ts", ".mjs", ".cjs", ".rb"}
_BINARY_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".pdf", ".mp3", ".wav", ".mp4"}


@dataclass
class Prompt:
    """One prompt template: text with `{{var}}` placeholders, or chat messages with them."""

    label: str | None
    template: str | list[dict[str, Any]]
    at: str


class Files:
    """Reads the files a config refers to, relative to the config's folder."""

    def __init__(self, base: Path, problems: Problems) -> None:
        self.base = base
        self.problems = problems

    def report(self, at: str, message: str) -> None:
        self.problems.add(at, message)

    def shown(self, path: Path) -> str:
        """`path` as the config would write it: relative to the config's folder."""
        return str(path.relative_to(self.base)) if path.is_relative_to(self.base) else str(path)

    def paths(self, ref: str, at: str) -> list[Path]:
        """The files a `file://` reference names (a glob may name several)."""
        raw = ref.removeprefix("file://")
        if Path(raw).suffix.split(":")[0].lower() in _SCRIPT_SUFFIXES:
            self.report(at, f"{ref}: scripts are not supported")
            return []
        pattern = Path(raw) if Path(raw).is_absolute() else self.base / raw
        if any(c in raw for c in "*?["):
            anchor = Path(pattern.anchor)
            found = sorted(anchor.glob(str(pattern.relative_to(anchor))))
            if not found:
                self.report(at, f"{ref}: no file matches")
            return found
        if not pattern.is_file():
            self.report(at, f"{ref}: no such file")
            return []
        return [pattern]

    def value(self, path: Path, at: str) -> Any:
        """A file's content as a value: text, or the data of a JSON or YAML file."""
        suffix = path.suffix.lower()
        if suffix in _SCRIPT_SUFFIXES:
            self.report(at, f"{self.shown(path)}: scripts are not supported")
            return FAILED
        if suffix in _BINARY_SUFFIXES:
            self.report(at, f"{self.shown(path)}: images, audio and PDF files are not supported")
            return FAILED
        if suffix in (".json", ".yaml", ".yml"):
            doc = read_doc(path, self.problems)
            return FAILED if doc is None else doc.data
        text = read_text(path, self.problems)
        return FAILED if text is None else text


def read_prompts(doc: Doc, raw: object, files: Files) -> list[Prompt]:
    """The prompts of a config: text templates or chat templates, files read."""
    if raw is None:
        files.report(doc.source, "prompts: missing")
        return []
    if isinstance(raw, str):
        entries: list[tuple[YamlPath, object, str | None]] = [(("prompts",), raw, None)]
    elif isinstance(raw, list):
        entries = [(("prompts", i), item, None) for i, item in enumerate(raw)]
    elif isinstance(raw, dict):
        entries = [
            (("prompts", str(k)), k, v if isinstance(v, str) else None) for k, v in raw.items()
        ]
    else:
        files.report(doc.at(("prompts",)), f"expected a list of prompts, got {json_kind(raw)}")
        return []
    prompts: list[Prompt] = []
    for path, item, label in entries:
        prompts.extend(_prompt(doc.at(path), item, label, files))
    return prompts


def _prompt(at: str, item: object, label: str | None, files: Files) -> list[Prompt]:
    if isinstance(item, dict):
        unknown = sorted(set(map(str, item)) - {"raw", "id", "label"})
        if unknown:
            files.report(at, f"unsupported prompt keys: {', '.join(unknown)}")
            return []
        label = item.get("label") if isinstance(item.get("label"), str) else label
        item = item.get("raw", item.get("id"))
    if not isinstance(item, str) or not item.strip():
        files.report(at, f"expected a prompt (text or file://), got {item!r}")
        return []
    if not item.startswith("file://"):
        return [Prompt(label, chat_template(item) or item, at)]
    prompts: list[Prompt] = []
    for path in files.paths(item, at):
        prompts.extend(_prompt_file(path, at, label, files))
    return prompts


def _prompt_file(path: Path, at: str, label: str | None, files: Files) -> list[Prompt]:
    suffix = path.suffix.lower()
    name = label or path.stem
    if suffix == ".jsonl":
        text = read_text(path, files.problems)
        lines = [] if text is None else [ln for ln in text.splitlines() if ln.strip()]
        found = [
            _chat_value(files, json_or_none(ln), f"{path}:{i}") for i, ln in enumerate(lines, 1)
        ]
        return [
            Prompt(f"{name}:{i}" if len(found) > 1 else name, chat, at)
            for i, chat in enumerate(found, start=1)
            if chat is not None
        ]
    value = files.value(path, at)
    if value is FAILED:
        return []
    if suffix in (".json", ".yaml", ".yml"):
        chat = _chat_value(files, value, str(path))
        return [] if chat is None else [Prompt(name, chat, at)]
    parts = [p.strip() for p in re.split(r"^---$", str(value), flags=re.MULTILINE)]
    parts = [p for p in parts if p]
    return [
        Prompt(f"{name}:{i}" if len(parts) > 1 else name, chat_template(p) or p, at)
        for i, p in enumerate(parts, start=1)
    ]


def _chat_value(files: Files, value: object, at: str) -> list[dict[str, Any]] | None:
    if (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) and "role" in m for m in value)
    ):
        return value
    files.report(at, "expected a chat prompt: a list of {role, content} messages")
    return None
