"""promptfoo assertions to trialkit graders: the deterministic types, `not-`, weights, sets."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping
from typing import Any

from trialkit.graders.base import GradeContext, Grader, run_grader
from trialkit.graders.compose import all_of, weighted
from trialkit.graders.match import (
    contains_all,
    contains_any,
    contains_json,
    is_json,
    json_equals,
    levenshtein,
    none_of,
    starts_with,
)
from trialkit.graders.text import contains, equals, matches
from trialkit.loaders.importers._promptfoo_parts import Spot, js_string
from trialkit.score import Score, Verdict

UNSUPPORTED_HINT = (
    "trialkit imports the assertion types {types}, each also with not-; write the other checks "
    "as trialkit graders in Python (a judge for model-graded ones)"
)

SUPPORTED_TYPES = (
    "equals",
    "contains",
    "icontains",
    "contains-any",
    "icontains-any",
    "contains-all",
    "icontains-all",
    "regex",
    "starts-with",
    "is-json",
    "contains-json",
    "levenshtein",
)
"""The assertion types trialkit imports, each also with the `not-` prefix."""

_ASSERTION_KEYS = {"type", "value", "weight", "threshold", "metric", "provider", "assert"}
"""`metric` only names a score in promptfoo's tables; `provider` only serves model-graded
types, which are not imported."""

Weighted = tuple[Grader, float]
Render = Callable[[Any, Spot], Any]
"""Renders an assertion's value (vars substituted, files read); `FAILED` after a problem."""
Report = Callable[[Spot, str], None]
"""Notes a problem: (where, message)."""


class AssertionBuilder:
    """Builds the graders of one test from its `assert` list.

    Unsupported types are noted with where they appear (`unsupported`), so the importer can
    list them all in one error.
    """

    def __init__(self, render: Render, report: Report, unsupported: dict[str, list[str]]) -> None:
        self.render = render
        self.report = report
        self.unsupported = unsupported

    def graders(
        self, specs: list[tuple[Spot, object]], threshold: object, test: Spot
    ) -> list[Grader]:
        """The graders of one test: its assertions `specs` (each with where it is)."""
        parts = [p for p in (self.assertion(spec, at) for at, spec in specs) if p is not None]
        return self.combine(parts, threshold, test)

    def combine(self, parts: list[Weighted], threshold: object, owner: Spot) -> list[Grader]:
        """promptfoo's rule: with a `threshold`, the weighted mean of the scores must reach
        it; without one every assertion must pass, except those of weight 0."""
        pass_at = _number(threshold)
        if threshold is not None and (pass_at is None or not 0 <= pass_at <= 1):
            self.report(owner / "threshold", f"expected a number from 0 to 1, got {threshold!r}")
            return []
        if not parts:
            return []
        if pass_at is None:
            return [grader if weight > 0 else not_gating(grader) for grader, weight in parts]
        if sum(weight for _, weight in parts) <= 0:
            self.report(owner / "assert", "the weights add up to 0, so no score can be computed")
            return []
        return [weighted(*parts, pass_at=pass_at)]

    def assertion(self, spec: object, at: Spot) -> Weighted | None:
        if not isinstance(spec, Mapping):
            self.report(at, f"expected an assertion object, got {spec!r}")
            return None
        kind = spec.get("type")
        if not isinstance(kind, str) or not kind:
            self.report(at / "type", "missing")
            return None
        unknown = sorted(set(map(str, spec)) - _ASSERTION_KEYS)
        if unknown:
            self.report(at, f"unsupported keys: {', '.join(unknown)} (they change the check)")
            return None
        weight = _number(spec.get("weight", 1))
        if weight is None or weight < 0:
            self.report(at / "weight", f"expected a number >= 0, got {spec.get('weight')!r}")
            return None
        if kind == "assert-set":
            grader = self._assert_set(spec, at)
        else:
            grader = self._single(kind, spec, at)
        return None if grader is None else (grader, weight)

    def _assert_set(self, spec: Mapping[str, Any], at: Spot) -> Grader | None:
        children = spec.get("assert")
        if not isinstance(children, list) or not children:
            self.report(at / "assert", "expected a list of assertions")
            return None
        parts = [self.assertion(child, at / "assert" / i) for i, child in enumerate(children)]
        if any(p is None for p in parts):
            return None
        graders = self.combine([p for p in parts if p is not None], spec.get("threshold"), at)
        if not graders:
            return None
        return graders[0] if len(graders) == 1 else all_of(*graders, name="assert-set")

    def _single(self, kind: str, spec: Mapping[str, Any], at: Spot) -> Grader | None:
        negated = kind.startswith("not-")
        base = kind[4:] if negated else kind
        make = _MAKERS.get(base)
        if make is None:
            self.unsupported.setdefault(kind, []).append(str(at))
            self.report(at / "type", f"unsupported assertion type {kind!r}")
            return None
        value = self.render(spec.get("value"), at / "value")
        if value is FAILED:
            return None
        try:
            grader = make(value, spec)
        except (TypeError, ValueError) as exc:
            self.report(at / "value", str(exc))
            return None
        return none_of(grader, name=f"not {grader.name}") if negated else grader


FAILED = object()
"""What `render` returns when the value could not be rendered (a problem was noted)."""


def _number(value: object) -> float | None:
    """`value` as a finite number, or `None` when it is not one (booleans are not numbers)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _text(value: object, kind: str) -> str:
    if isinstance(value, str) and value:
        return value
    if _number(value) is not None:
        return js_string(value)
    raise ValueError(f"{kind}: expected a non-empty string, got {value!r}")


def _texts(value: object, kind: str) -> list[str]:
    if isinstance(value, str):
        items: list[object] = [v.strip() for v in next(csv.reader([value], skipinitialspace=True))]
    elif isinstance(value, list):
        items = list(value)
    else:
        raise ValueError(f"{kind}: expected a list of strings (or one comma-separated string)")
    texts = [_text(item, kind) for item in items]
    if not texts:
        raise ValueError(f"{kind}: expected at least one string")
    return texts


def _schema(value: object, kind: str) -> Mapping[str, Any] | None:
    if value is None or value == "" or value is True:
        return None
    if isinstance(value, str):
        import yaml

        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ValueError(f"{kind}: the schema is not valid YAML or JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{kind}: expected a JSON Schema object, got {value!r}")
    return value


def _equals(value: object, spec: Mapping[str, Any]) -> Grader:
    if isinstance(value, Mapping | list):
        return json_equals(value)
    if value is None:
        raise ValueError("equals: expected a value")
    return equals(js_string(value), strip=False)


def _levenshtein(value: object, spec: Mapping[str, Any]) -> Grader:
    threshold = spec.get("threshold")
    if threshold is None:
        return levenshtein(_text(value, "levenshtein"))
    distance = _number(threshold)
    if distance is None or distance < 0:
        raise ValueError(f"levenshtein: threshold must be a number >= 0, got {threshold!r}")
    return levenshtein(_text(value, "levenshtein"), max_distance=math.floor(distance))


_MAKERS: dict[str, Callable[[Any, Mapping[str, Any]], Grader]] = {
    "equals": _equals,
    "contains": lambda v, _: contains(_text(v, "contains"), case_sensitive=True),
    "icontains": lambda v, _: contains(_text(v, "icontains")),
    "contains-any": lambda v, _: contains_any(_texts(v, "contains-any"), case_sensitive=True),
    "icontains-any": lambda v, _: contains_any(_texts(v, "icontains-any")),
    "contains-all": lambda v, _: contains_all(_texts(v, "contains-all"), case_sensitive=True),
    "icontains-all": lambda v, _: contains_all(_texts(v, "icontains-all")),
    "regex": lambda v, _: matches(_text(v, "regex")),
    "starts-with": lambda v, _: starts_with(_text(v, "starts-with"), strip=False),
    "is-json": lambda v, _: is_json(_schema(v, "is-json")),
    "contains-json": lambda v, _: contains_json(_schema(v, "contains-json")),
    "levenshtein": _levenshtein,
}
assert set(_MAKERS) == set(SUPPORTED_TYPES)


class not_gating(Grader):
    """Runs a check and reports it, but passes whatever it says: promptfoo's `weight: 0`."""

    def __init__(self, inner: Grader) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return f"{self.inner.name} (weight 0)"

    async def grade(self, ctx: GradeContext) -> Score:
        score = await run_grader(self.inner, ctx)
        if score.verdict is Verdict.ERROR:
            return score
        return Score(
            value=score.value,
            verdict=Verdict.PASS,
            rationale=f"weight 0, reported only: {score.verdict}",
            assertions=[score.as_assertion()],
        )
