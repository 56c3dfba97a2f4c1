"""Code graders over the agent's final output."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trialkit.graders.base import GradeContext, Grader, GraderResult
from trialkit.score import Score

_FENCE = re.compile(r"^\s*```[^\n`]*\n(?P<body>.*?)\n?```\s*$", re.DOTALL)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class contains(Grader):
    """The output contains `text` (case-insensitive unless `case_sensitive`)."""

    text: str
    case_sensitive: bool = False

    @property
    def name(self) -> str:
        return f"contains({self.text!r})"

    def grade(self, ctx: GradeContext) -> Score:
        found = _find(ctx.output, self.text, self.case_sensitive)
        why = None if found else f"output does not contain {_short(self.text)!r}"
        return Score.from_bool(found, rationale=why)


@dataclass
class not_contains(Grader):
    """The output does not contain `text` (case-insensitive unless `case_sensitive`)."""

    text: str
    case_sensitive: bool = False

    @property
    def name(self) -> str:
        return f"not_contains({self.text!r})"

    def grade(self, ctx: GradeContext) -> Score:
        found = _find(ctx.output, self.text, self.case_sensitive)
        why = f"output contains {_short(self.text)!r}" if found else None
        return Score.from_bool(not found, rationale=why)


def _find(haystack: str, needle: str, case_sensitive: bool) -> bool:
    if case_sensitive:
        return needle in haystack
    return needle.casefold() in haystack.casefold()


@dataclass
class matches(Grader):
    """The output matches the regular expression `pattern` anywhere (`re.search`)."""

    pattern: str
    ignore_case: bool = False
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            self._regex = re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)
        except re.error as exc:
            raise ValueError(f"matches: pattern: invalid regular expression: {exc}") from None

    @property
    def name(self) -> str:
        return f"matches({self.pattern!r})"

    def grade(self, ctx: GradeContext) -> Score:
        ok = self._regex.search(ctx.output) is not None
        why = None if ok else f"output does not match /{_short(self.pattern)}/"
        return Score.from_bool(ok, rationale=why)


@dataclass
class equals(Grader):
    """The output equals `expected` (after stripping surrounding whitespace, by default)."""

    expected: str
    strip: bool = True
    case_sensitive: bool = True

    @property
    def name(self) -> str:
        return f"equals({_short(self.expected, 40)!r})"

    def grade(self, ctx: GradeContext) -> Score:
        actual, expected = ctx.output, self.expected
        if self.strip:
            actual, expected = actual.strip(), expected.strip()
        if not self.case_sensitive:
            actual, expected = actual.casefold(), expected.casefold()
        ok = actual == expected
        why = None if ok else f"expected {_short(self.expected)!r}, got {_short(ctx.output)!r}"
        return Score.from_bool(ok, rationale=why)


def parse_json_output(text: str) -> Any:
    """Parse `text` as JSON; if that fails, strip one wrapping markdown code fence and retry."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        fenced = _FENCE.match(text)
        if fenced is None:
            raise first from None
        return json.loads(fenced.group("body"))


@dataclass
class valid_json(Grader):
    """The output is JSON (optionally inside one markdown code fence).

    `where` is a predicate on the parsed value; `schema` a JSON Schema it must satisfy.
    """

    where: Callable[[Any], bool] | None = None
    schema: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.schema is not None:
            from jsonschema import validators

            validator_cls = validators.validator_for(self.schema)
            try:
                validator_cls.check_schema(dict(self.schema))
            except Exception as exc:
                raise ValueError(f"valid_json: schema: not a valid JSON Schema: {exc}") from None

    @property
    def name(self) -> str:
        return "valid_json"

    def grade(self, ctx: GradeContext) -> Score:
        try:
            value = parse_json_output(ctx.output)
        except json.JSONDecodeError as exc:
            return Score.from_bool(False, rationale=f"output is not JSON: {exc}")
        if self.schema is not None:
            from jsonschema import validators

            validator = validators.validator_for(self.schema)(self.schema)
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                where = "/".join(str(p) for p in first.path) or "(root)"
                return Score.from_bool(
                    False, rationale=f"JSON does not match the schema at {where}: {first.message}"
                )
        if self.where is not None and not self.where(value):
            described = getattr(self.where, "__name__", "where")
            return Score.from_bool(False, rationale=f"JSON does not satisfy {described}")
        return Score.from_bool(True)


@dataclass
class predicate(Grader):
    """A described check: `fn(ctx)` returns a bool, a float or a `Score`.

    ```python
    predicate("answer is short", lambda ctx: len(ctx.output) < 200)
    ```
    """

    description: str
    fn: Callable[[GradeContext], GraderResult]
    pass_at: float = 1.0

    blocking = True  # user code: run it in a worker thread, never on the event loop

    @property
    def name(self) -> str:
        return self.description

    def grade(self, ctx: GradeContext) -> GraderResult:
        return self.fn(ctx)


@dataclass
class agent_failed(Grader):
    """The agent raised or reported failure, optionally with `message` in its failure text.

    The check for `expect="failure"` tasks: the runner adds it to such a task that has no
    graders of its own.
    """

    message: str | None = None

    @property
    def name(self) -> str:
        return "agent_failed" if self.message is None else f"agent_failed({self.message!r})"

    def grade(self, ctx: GradeContext) -> Score:
        if not ctx.outcome.failed:
            return Score.from_bool(False, rationale="the agent did not fail")
        failure = ctx.outcome.failure or ""
        if self.message is not None and not _find(failure, self.message, False):
            return Score.from_bool(
                False, rationale=f"the agent failed, but not with {self.message!r}: {failure!r}"
            )
        return Score.from_bool(True, rationale=failure or None)
