"""The parts of a promptfoo config: YAML with line numbers, templates, provider ids."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trialkit.loaders.importers._common import (
    Problems,
    json_kind,
    parse_json,
    read_text,
    slug,
    unique_ids,
    where,
)
from trialkit.models.base import GenerationConfig

YamlPath = tuple[str | int, ...]
"""Where a node is in a document: `("tests", 2, "assert")`."""
Report = Callable[[str, str], None]
"""Notes a problem: (where, message)."""

_GENERATION_KEYS = {"temperature", "max_tokens", "top_p", "seed", "stop"}
_SECRET_KEYS = {"apiKey", "apiKeyEnvar"}
"""Provider settings trialkit's own providers take from the environment instead."""


@dataclass
class Doc:
    """A parsed YAML/JSON file and the line of each node, for messages."""

    source: str
    data: Any
    lines: dict[YamlPath, int] = field(default_factory=dict)

    def at(self, path: YamlPath) -> str:
        line = None
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                break
        return where(self.source, line, dotted(path) or None)


@dataclass(frozen=True)
class Spot:
    """A place in a document, for messages: `str(spot)` is `file:line: field`."""

    doc: Doc
    path: YamlPath

    def __truediv__(self, key: str | int) -> Spot:
        return Spot(self.doc, (*self.path, key))

    def __str__(self) -> str:
        return self.doc.at(self.path)


def js_string(value: object) -> str:
    """A value as promptfoo (JavaScript) writes it into text: `1` not `1.0`, `true` not `True`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def dotted(path: YamlPath) -> str:
    """`tests[2].assert[0]` for `("tests", 2, "assert", 0)`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def read_doc(path: Path, problems: Problems) -> Doc | None:
    """A YAML (or JSON) file with the line of each node, or `None` after noting why not.

    Read as suite files are (`read_document`): aliases that hold themselves, values nested too
    deep and files too large are problems, never a `RecursionError` later.
    """
    from trialkit.loaders.suite_file.documents import read_document

    if read_text(path, problems) is None:
        return None
    parsed, found = read_document(path, str(path))
    for problem in found:
        message = problem.message.replace("not valid YAML: ", "invalid YAML: ")
        problems.add(where(problem.file, problem.line, problem.field or None), message)
    if parsed is None or found:
        return None
    return Doc(str(path), parsed.data, dict(parsed.lines))


@dataclass(frozen=True)
class Provider:
    """A promptfoo provider and the trialkit model it maps to."""

    label: str
    source: str | None
    model: str | None
    config: GenerationConfig | None


NO_PROVIDER = Provider("model", None, None, None)
"""The suite's model: no provider named, or replaced by the importer's `model=`."""


def read_providers(doc: Doc, config: dict[str, Any], report: Report) -> list[Provider]:
    """The providers of a config, each mapped to a trialkit model id."""
    key = "providers" if "providers" in config else "targets"
    raw = config.get(key)
    if raw is None:
        return [NO_PROVIDER]
    items = raw if isinstance(raw, list) else [raw]
    providers = [_provider(doc.at((key, i)), item, report) for i, item in enumerate(items)]
    found = [p for p in providers if p is not None]
    labels = unique_ids([p.label for p in found])
    return [replace(p, label=label) for p, label in zip(found, labels, strict=True)] or [
        NO_PROVIDER
    ]


def _provider(at: str, item: object, report: Report) -> Provider | None:
    label: str | None = None
    options: dict[str, Any] = {}
    if isinstance(item, dict) and "id" in item:
        source, label, options = item.get("id"), item.get("label"), dict(item)
        options.pop("id")
        options.pop("label", None)
    elif isinstance(item, dict) and len(item) == 1:
        [(source, value)] = item.items()
        options = dict(value) if isinstance(value, dict) else {}
        label = options.pop("label", None)
    else:
        source = item
    if not isinstance(source, str):
        report(at, f"expected a provider id like openai:gpt-4o-mini, got {item!r}")
        return None
    model = model_id(source)
    if model is None:
        report(
            at,
            f"unsupported provider {source!r} (trialkit maps openai:MODEL, openai:chat:MODEL, "
            "anthropic:messages:MODEL and echo); pass a model to the importer (--model) to "
            "run these tests on another model",
        )
        return None
    options.pop("delay", None)
    options.pop("env", None)
    generation = _generation(at, report, options.pop("config", None) or {})
    for key in sorted(options):
        report(f"{at}.{key}", "not supported for providers")
    name = label if isinstance(label, str) and slug(label) else slug(model)
    return Provider(slug(name), source, model, generation)


def _generation(at: str, report: Report, config: object) -> GenerationConfig | None:
    if not isinstance(config, dict):
        report(f"{at}.config", f"expected a mapping, got {json_kind(config)}")
        return None
    chosen = {k: v for k, v in config.items() if k in _GENERATION_KEYS}
    for key in sorted(set(map(str, config)) - _GENERATION_KEYS - _SECRET_KEYS):
        report(
            f"{at}.config.{key}",
            "not supported (trialkit maps temperature, max_tokens, top_p, seed, stop)",
        )
    if isinstance(chosen.get("stop"), str):
        chosen["stop"] = [chosen["stop"]]
    if not chosen:
        return None
    try:
        return GenerationConfig.model_validate(chosen)
    except ValueError as exc:
        report(f"{at}.config", str(exc).splitlines()[0])
        return None


def render(
    template: str, vars_: Mapping[str, Any], at: str, report: Report, context: str = ""
) -> str | None:
    """`template` with `{{ name }}` placeholders filled from `vars_`."""
    if "{%" in template or "{#" in template:
        report(at, "uses Nunjucks tags ({% ... %} or {# ... #}), which are not rendered")
        return None
    ok = True

    def fill(found: re.Match[str]) -> str:
        nonlocal ok
        expression = found.group(1).strip()
        if not _VARIABLE.fullmatch(expression):
            report(
                at,
                f"{{{{ {expression} }}}}: only plain variables are rendered "
                "(no Nunjucks filters or expressions)",
            )
            ok = False
            return ""
        value = _lookup(vars_, expression)
        if value is _MISSING:
            report(at, f"{{{{ {expression} }}}}: no such var{context}")
            ok = False
            return ""
        return _as_text(value)

    text = _PLACEHOLDER.sub(fill, template)
    return text if ok else None


_PLACEHOLDER = re.compile(r"{{-?(.*?)-?}}", re.DOTALL)
_VARIABLE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[\d+\])*")
_PATH_PART = re.compile(r"\.?([A-Za-z_]\w*)|\[(\d+)\]")
_MISSING = object()


def _lookup(vars_: Mapping[str, Any], expression: str) -> Any:
    value: Any = vars_
    for name, index in _PATH_PART.findall(expression):
        if name and isinstance(value, Mapping) and name in value:
            value = value[name]
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
    return value


def _as_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return js_string(value)


def json_or_none(text: str) -> Any:
    try:
        return parse_json(text)
    except json.JSONDecodeError:
        return None


def chat_template(text: str) -> list[dict[str, Any]] | None:
    """A prompt written as a JSON list of chat messages, as promptfoo's chat providers read it."""
    if not text.lstrip().startswith("["):
        return None
    value = json_or_none(text)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(m, dict) and "role" in m for m in value)
    ):
        return value
    return None


def model_id(source: str) -> str | None:
    """The trialkit model id of a promptfoo provider id, or `None` when there is none."""
    if source == "echo":
        return "scripted/echo"
    provider, _, rest = source.partition(":")
    if provider == "openai" and rest:
        kind, _, name = rest.partition(":")
        if kind in ("chat", "responses"):
            return f"openai/{name}" if name else None
        if kind in ("completion", "embedding", "embeddings", "image", "assistant", "moderation"):
            return None
        return f"openai/{rest}"
    if provider == "anthropic" and rest:
        kind, _, name = rest.partition(":")
        if kind == "messages":
            return f"anthropic/{name}" if name else None
        if kind.startswith("claude"):
            return f"anthropic/{rest}"
    return None
