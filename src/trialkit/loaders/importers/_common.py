"""What the importers share: the problem list, ids, and the graders for reference answers."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

from trialkit._record import nested_deeper_than
from trialkit.graders.base import Grader
from trialkit.graders.match import contains_any, fuzzy_match, starts_with
from trialkit.task import SuiteError
from trialkit.transcript import Message

MatchKind: TypeAlias = Literal["match", "includes", "fuzzy_match"]
"""How an output is checked against reference answers, named after openai/evals' templates:
`match` (starts with one), `includes` (contains one), `fuzzy_match` (either contains the
other after normalisation)."""

MATCH_KINDS: tuple[MatchKind, ...] = ("match", "includes", "fuzzy_match")

_LISTED = 50
"""How many problems an error message shows; `ImportFailed.problems` keeps them all."""


class ImportFailed(SuiteError):
    """A file in another tool's format cannot be imported; the message lists every problem
    found, one per line, as `file:line: field: message`.

    A `SuiteError`, so the command line exits 2 (a bad suite: nothing ran).
    """

    def __init__(
        self,
        source: str,
        problems: Sequence[str],
        summary: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        head = f"{source}: cannot import ({count} problem{'s' if count != 1 else ''})"
        if summary:
            head += f"; {summary}"
        lines = [head + ":", *(f"  {p}" for p in self.problems[:_LISTED])]
        if count > _LISTED:
            lines.append(f"  … and {count - _LISTED} more")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


class Problems:
    """Collects every problem of a file before one `ImportFailed` reports them all."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []
        self._seen: set[str] = set()

    def add(self, where: str, message: str) -> None:
        text = f"{where}: {message}"
        if text not in self._seen:
            self._seen.add(text)
            self.items.append(text)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self, summary: str | None = None, hint: str | None = None) -> None:
        if self.items:
            raise ImportFailed(self.source, self.items, summary, hint)


MAX_JSON_DEPTH = 100
"""As for suite files: JSON nested deeper than this is refused, not parsed and recursed into."""


def parse_json(text: str) -> Any:
    """`json.loads(text)`, except that a value nested more than `MAX_JSON_DEPTH` levels deep
    is a `json.JSONDecodeError` too, so the callers report it as the file's problem."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        deep = True
    else:
        deep = nested_deeper_than(value, MAX_JSON_DEPTH)
    if deep:
        raise json.JSONDecodeError(f"nested more than {MAX_JSON_DEPTH} levels deep", text, 0)
    return value


def where(file: str, line: int | None = None, field: str | None = None) -> str:
    """`file:line: field`, leaving out what is unknown."""
    text = file if line is None else f"{file}:{line}"
    return text if field is None else f"{text}: {field}"


def slug(text: str, *, limit: int = 60) -> str:
    """A readable id from free text: lower-case ASCII words joined by `-`."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return words[:limit].rstrip("-")


def unique_ids(ids: Iterable[str]) -> list[str]:
    """`ids` with repeats made unique: the second `x` becomes `x-2`, the third `x-3`."""
    taken: set[str] = set()
    counts: dict[str, int] = {}
    result: list[str] = []
    for wanted in ids:
        candidate = wanted
        while candidate in taken:
            counts[wanted] = counts.get(wanted, 1) + 1
            candidate = f"{wanted}-{counts[wanted]}"
        taken.add(candidate)
        result.append(candidate)
    return result


def suite_id_for(path: Path) -> str:
    return slug(path.stem) or "imported"


def answer_grader(kind: MatchKind, answers: Sequence[str], *, case_sensitive: bool) -> Grader:
    """The check of an output against reference answers: passes when any answer matches."""
    if kind == "match":
        return starts_with(list(answers), case_sensitive=case_sensitive)
    if kind == "includes":
        return contains_any(list(answers), case_sensitive=case_sensitive)
    if kind == "fuzzy_match":
        return fuzzy_match(list(answers))
    raise ValueError(f"match: expected one of {', '.join(MATCH_KINDS)}, got {kind!r}")


def check_match_kind(kind: str) -> None:
    if kind not in MATCH_KINDS:
        raise ValueError(f"match: expected one of {', '.join(MATCH_KINDS)}, got {kind!r}")


def read_text(path: Path, problems: Problems) -> str | None:
    """The file's text (UTF-8, a BOM allowed), or `None` after noting why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        problems.add(str(path), "no such file")
    except IsADirectoryError:
        problems.add(str(path), "is a folder, not a file")
    except UnicodeDecodeError as exc:
        problems.add(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        problems.add(str(path), f"cannot be read: {exc.strerror or exc}")
    return None


_ROLES = ("system", "user", "assistant")
_EXAMPLE_ROLES = {"example_user": "user", "example_assistant": "assistant"}
_INERT_MESSAGE_KEYS = {"id", "source", "metadata"}
"""Keys of a message in other tools' files that do not change what the model is sent."""


def read_messages(value: list[object], at: str, problems: Problems) -> list[Message] | None:
    """Chat messages from `[{"role": ..., "content": ...}, ...]`, or `None` after noting each
    problem under `at` (e.g. `file:3: input`).

    openai/evals few-shot examples (`system` messages named `example_user` or
    `example_assistant`) become plain user and assistant turns, as evals renders them.
    """
    if not value:
        problems.add(at, "an empty list of messages")
        return None
    messages: list[Message] = []
    ok = True
    for index, item in enumerate(value):
        here = f"{at}[{index}]"
        if not isinstance(item, dict):
            problems.add(here, f"expected a message object, got {json_kind(item)}")
            ok = False
            continue
        role, content, name = item.get("role"), item.get("content"), item.get("name")
        unknown = sorted(set(item) - {"role", "content", "name"} - _INERT_MESSAGE_KEYS)
        if unknown:
            problems.add(here, f"unsupported message keys: {', '.join(map(str, unknown))}")
            ok = False
        if role not in _ROLES:
            problems.add(f"{here}.role", f"expected one of {', '.join(_ROLES)}, got {role!r}")
            ok = False
            continue
        text = _content_text(content)
        if text is None:
            problems.add(f"{here}.content", f"expected text, got {json_kind(content)}")
            ok = False
            continue
        if name is not None:
            if role == "system" and name in _EXAMPLE_ROLES:
                role = _EXAMPLE_ROLES[str(name)]
            else:
                problems.add(
                    f"{here}.name",
                    f"{name!r} is not supported (only system messages named example_user or "
                    "example_assistant, openai/evals' few-shot examples)",
                )
                ok = False
                continue
        messages.append(Message(role=role, content=text))
    return messages if ok else None


def _content_text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        return "".join(str(p["text"]) for p in content)
    return None


def json_kind(value: object) -> str:
    """The JSON name of a value's type, for messages about files."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
