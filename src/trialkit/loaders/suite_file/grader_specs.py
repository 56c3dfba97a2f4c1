"""Graders as suite files write them: a mapping with one key, the grader's short name.

```yaml
graders:
  - contains: paris                              # the short form of the main argument
  - matches: {pattern: "\\bParis\\b", ignore_case: true}
  - valid_json: {schema: {type: object, required: [city]}}
  - any_of: [{contains: paris}, {contains: lutetia}]
  - weighted: {pass_at: 0.6, graders: [{grader: {contains: paris}, weight: 2}]}
  - python: my_graders:polite                    # a custom grader, by import path
  - judge: {rubric: Names Paris., must_fail: [Berlin.]}   # a model grader with a control
  - human: Is the tone polite?                   # a person's verdict, after the run
```

The entries for agents' tool calls and workspaces are in `agent_specs`, those of model and
human judges in `judge_specs`.
`GRADERS` maps each short name to its entry model; `entry.build(ctx, path)` makes the runtime
grader (or records a problem and returns `None`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, JsonValue, field_validator

from trialkit import graders
from trialkit.graders.base import Grader, GraderLike, as_grader
from trialkit.loaders.errors import FieldPath
from trialkit.loaders.suite_file.agent_specs import (
    FileAbsent,
    FileContains,
    FileExists,
    FileJson,
    MaxToolCalls,
    MaxTurns,
    NoToolErrors,
    OnlyChanged,
    ToolCalled,
    ToolNotCalled,
    ToolOrder,
    Unchanged,
)
from trialkit.loaders.suite_file.context import BuildContext
from trialkit.loaders.suite_file.entry import GraderEntry
from trialkit.loaders.suite_file.fields import (
    TEXT_SCHEMA,
    Count,
    FileModel,
    Fraction,
    PythonRef,
    Shorthand,
    Text,
    Weight,
    check_one_key,
    describe,
    has_template,
    key_among,
    one_key,
    problem,
)
from trialkit.loaders.suite_file.judge_specs import Human, Judge


class TextArgs(Shorthand):
    """Arguments of `contains` / `not_contains`; `contains: paris` is the short form."""

    short_field = "text"
    short_schema = TEXT_SCHEMA
    text: Text
    """The text to look for in the output."""
    case_sensitive: bool = False
    """Compare case-sensitively (by default case is ignored)."""


class Contains(GraderEntry):
    """The output contains the text (case-insensitive unless `case_sensitive`)."""

    name = "contains"
    contains: TextArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.contains
        return graders.contains(a.text, case_sensitive=a.case_sensitive)


class NotContains(GraderEntry):
    """The output does not contain the text (case-insensitive unless `case_sensitive`)."""

    name = "not_contains"
    not_contains: TextArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.not_contains
        return graders.not_contains(a.text, case_sensitive=a.case_sensitive)


class PatternArgs(Shorthand):
    """Arguments of `matches`; `matches: "\\d+"` is the short form."""

    short_field = "pattern"
    pattern: str
    """A Python regular expression, searched anywhere in the output."""
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        if not has_template(pattern):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise problem(f"invalid regular expression: {exc}") from None
        return pattern


class Matches(GraderEntry):
    """The output matches the regular expression anywhere (`re.search`)."""

    name = "matches"
    matches: PatternArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.matches
        return self._make(ctx, path, graders.matches, a.pattern, ignore_case=a.ignore_case)


class ExpectedArgs(Shorthand):
    """Arguments of `equals`; `equals: Paris` is the short form."""

    short_field = "expected"
    short_schema = TEXT_SCHEMA
    expected: Text
    """The whole expected output."""
    strip: bool = True
    """Ignore surrounding whitespace."""
    case_sensitive: bool = True


class Equals(GraderEntry):
    """The output equals the expected text (after stripping whitespace, by default)."""

    name = "equals"
    equals: ExpectedArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.equals
        return graders.equals(a.expected, strip=a.strip, case_sensitive=a.case_sensitive)


class JsonArgs(Shorthand):
    """Arguments of `valid_json`; `valid_json: {}` (or nothing) checks only that it parses."""

    allow_null = True
    json_schema: dict[str, JsonValue] | None = Field(default=None, alias="schema")
    """A JSON Schema the parsed output must satisfy."""
    where: PythonRef | None = None
    """A predicate on the parsed value, by import path (`my_checks:has_city`)."""


class ValidJson(GraderEntry):
    """The output is JSON (optionally in one markdown code fence)."""

    name = "valid_json"
    valid_json: JsonArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.valid_json
        where = None
        if a.where is not None:
            where = ctx.resolve((*path, self.name, "where"), a.where)
            if where is None:
                return None
            if not callable(where):
                ctx.problem((*path, self.name, "where"), f"{a.where} is {describe(where)}")
                return None
        return self._make(ctx, path, graders.valid_json, where=where, schema=a.json_schema)


class FailureArgs(Shorthand):
    """Arguments of `agent_failed`; `agent_failed: "will not"` is the short form."""

    short_field = "message"
    allow_null = True
    message: str | None = None
    """Text the agent's failure message must contain."""


class AgentFailed(GraderEntry):
    """The agent raised or reported failure: the check of `expect: failure` tasks."""

    name = "agent_failed"
    agent_failed: FailureArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return graders.agent_failed(self.agent_failed.message)


class AllOf(GraderEntry):
    """Passes when every grader in the list passes."""

    name = "all_of"
    all_of: Annotated[list[GraderSpec], Field(min_length=1)]

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        parts = build_graders(ctx, (*path, self.name), self.all_of)
        return None if parts is None else graders.all_of(*parts)


class AnyOf(GraderEntry):
    """Passes when at least one grader in the list passes."""

    name = "any_of"
    any_of: Annotated[list[GraderSpec], Field(min_length=1)]

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        parts = build_graders(ctx, (*path, self.name), self.any_of)
        return None if parts is None else graders.any_of(*parts)


class WeightedPart(FileModel):
    """One grader of a `weighted` mean and its weight."""

    grader: GraderSpec
    weight: Weight = 1.0


class WeightedArgs(FileModel):
    """Arguments of `weighted`."""

    graders: Annotated[list[WeightedPart], Field(min_length=1)]
    pass_at: Fraction = 1.0
    """The weighted mean at or above which the check passes."""


class Weighted(GraderEntry):
    """The weighted mean of the graders' values, passing at `pass_at`."""

    name = "weighted"
    weighted: WeightedArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        here = (*path, self.name, "graders")
        parts = [
            part.grader.build(ctx, (*here, i, "grader"))
            for i, part in enumerate(self.weighted.graders)
        ]
        if any(p is None for p in parts):
            return None
        pairs = [(p, w.weight) for p, w in zip(parts, self.weighted.graders, strict=True)]
        return self._make(ctx, path, graders.weighted, *pairs, pass_at=self.weighted.pass_at)


class PredicateArgs(FileModel):
    """Arguments of `predicate`: a described check by import path."""

    description: str
    """What the check means, shown as the score's name."""
    fn: PythonRef
    """A function of the `GradeContext` returning a bool, a float or a `Score`."""
    pass_at: Fraction = 1.0


class Predicate(GraderEntry):
    """A described check: a function of the `GradeContext`, by import path."""

    name = "predicate"
    predicate: PredicateArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.predicate
        fn = ctx.resolve((*path, self.name, "fn"), a.fn)
        if fn is None:
            return None
        if not callable(fn):
            ctx.problem((*path, self.name, "fn"), f"{a.fn} is {describe(fn)}, not a function")
            return None
        return self._make(ctx, path, graders.predicate, a.description, fn, pass_at=a.pass_at)


class PythonArgs(Shorthand):
    """A custom grader by import path; `python: my_graders:polite` is the short form."""

    short_field = "ref"
    ref: PythonRef
    """A grader (a `Grader` or a function of the `GradeContext`), or a factory of one."""
    args: dict[str, JsonValue] | None = None
    """When given, `ref` is called with these keyword arguments and must return a grader."""


class PythonGrader(GraderEntry):
    """A custom grader by import path, resolved with the suite's folder on `sys.path`."""

    name = "python"
    python: PythonArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a, here = self.python, (*path, self.name)
        found = ctx.resolve(here, a.ref)
        if found is None:
            return None
        made: Any = found
        try:
            if a.args is not None:
                made = found(**a.args)
            elif isinstance(found, type) and issubclass(found, Grader):
                made = found()
        except Exception as exc:
            ctx.problem(here, f"{a.ref}: calling it raised {type(exc).__name__}: {exc}")
            return None
        try:
            return as_grader(made)
        except TypeError:
            ctx.problem(
                here,
                f"{a.ref} is {describe(made)}, not a grader "
                "(a trialkit Grader or a function of the GradeContext)",
            )
            return None


TEXTS_SCHEMA: dict[str, Any] = {"anyOf": [TEXT_SCHEMA, {"type": "array", "items": TEXT_SCHEMA}]}


class TextsArgs(Shorthand):
    """Arguments of the checks over several texts; `starts_with: [Paris, paris]` is short."""

    short_field = "texts"
    short_schema = TEXTS_SCHEMA
    texts: Text | list[Text]
    """One text, or several."""
    case_sensitive: bool | None = None
    """Compare case-sensitively; each check has its own default."""

    def options(self) -> dict[str, bool]:
        return {} if self.case_sensitive is None else {"case_sensitive": self.case_sensitive}


class StartsWith(GraderEntry):
    """The output starts with one of the texts (openai/evals `Match`)."""

    name = "starts_with"
    starts_with: TextsArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.starts_with
        return self._make(ctx, path, graders.starts_with, a.texts, **a.options())


class ContainsAny(GraderEntry):
    """The output contains at least one of the texts (openai/evals `Includes`)."""

    name = "contains_any"
    contains_any: TextsArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.contains_any
        return self._make(ctx, path, graders.contains_any, a.texts, **a.options())


class ContainsAll(GraderEntry):
    """The output contains every one of the texts."""

    name = "contains_all"
    contains_all: TextsArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.contains_all
        return self._make(ctx, path, graders.contains_all, a.texts, **a.options())


class FuzzyArgs(Shorthand):
    """Arguments of `fuzzy_match`; `fuzzy_match: [Paris]` is the short form."""

    short_field = "texts"
    short_schema = TEXTS_SCHEMA
    texts: Text | list[Text]


class FuzzyMatch(GraderEntry):
    """After normalising both, the output contains a text or a text contains the output
    (openai/evals `FuzzyMatch`)."""

    name = "fuzzy_match"
    fuzzy_match: FuzzyArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.fuzzy_match, self.fuzzy_match.texts)


class LevenshteinArgs(Shorthand):
    """Arguments of `levenshtein`; `levenshtein: Paris` is the short form (5 edits allowed)."""

    short_field = "expected"
    short_schema = TEXT_SCHEMA
    expected: Text
    max_distance: Count = 5


class Levenshtein(GraderEntry):
    """The output is at most `max_distance` edits away from `expected`."""

    name = "levenshtein"
    levenshtein: LevenshteinArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.levenshtein
        return self._make(ctx, path, graders.levenshtein, a.expected, max_distance=a.max_distance)


GRADERS: Mapping[str, type[GraderEntry]] = MappingProxyType(
    {
        entry.name: entry
        for entry in (
            Contains,
            NotContains,
            Matches,
            Equals,
            ValidJson,
            AgentFailed,
            AllOf,
            AnyOf,
            Weighted,
            Predicate,
            StartsWith,
            ContainsAny,
            ContainsAll,
            FuzzyMatch,
            Levenshtein,
            ToolCalled,
            ToolNotCalled,
            ToolOrder,
            MaxToolCalls,
            MaxTurns,
            NoToolErrors,
            FileExists,
            FileAbsent,
            FileContains,
            FileJson,
            OnlyChanged,
            Unchanged,
            PythonGrader,
            Judge,
            Human,
        )
    }
)
"""Every grader a suite file can name, by short name."""

if TYPE_CHECKING:
    GraderSpec = GraderEntry
else:
    GraderSpec = Annotated[
        one_key(key_among(tuple(GRADERS)), *GRADERS.items()),
        check_one_key("grader", tuple(GRADERS)),
        Field(description="A grader: a mapping with one key, the grader's short name."),
    ]
    """A grader entry of any kind, told apart by its one key."""


def build_graders(
    ctx: BuildContext, path: FieldPath, entries: list[GraderEntry]
) -> list[GraderLike] | None:
    """The runtime graders of `entries`, or `None` when any of them has a problem."""
    built = [entry.build(ctx, (*path, i)) for i, entry in enumerate(entries)]
    return None if any(g is None for g in built) else [g for g in built if g is not None]


for _model in (AllOf, AnyOf, WeightedPart, WeightedArgs, Weighted):
    _model.model_rebuild()
