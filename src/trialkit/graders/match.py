"""Graders with the semantics of other eval tools, so an imported suite grades as it did there.

- openai/evals: `starts_with` (its `Match`), `contains_any(..., case_sensitive=True)` (its
  `Includes`), `fuzzy_match` (its `FuzzyMatch`).
- promptfoo: `contains_any`, `contains_all`, `is_json`, `contains_json`, `json_equals`,
  `levenshtein`, and `none_of` for its `not-` prefix.
- inspect_ai: `choice_answer` for multiple-choice samples.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trialkit.graders.base import GradeContext, Grader, GraderLike, as_grader
from trialkit.graders.compose import _grade_all
from trialkit.score import Score, Verdict


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _texts(value: str | Sequence[str], label: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    texts = tuple(value)
    if not texts:
        raise ValueError(f"{label}: needs at least one text")
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"{label}: expected strings, got {type(text).__name__}")
    return texts


def _shown(texts: tuple[str, ...]) -> str:
    if len(texts) == 1:
        return repr(_short(texts[0], 40))
    return (
        "["
        + ", ".join(repr(_short(t, 20)) for t in texts[:3])
        + (", …]" if len(texts) > 3 else "]")
    )


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


@dataclass
class _TextsCheck(Grader):
    texts: str | Sequence[str]
    """One text, or several."""
    _options: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._options = _texts(self.texts, type(self).__name__)

    @property
    def name(self) -> str:
        return f"{type(self).__name__}({_shown(self._options)})"


@dataclass
class starts_with(_TextsCheck):
    """The output starts with one of `texts` (openai/evals `Match`).

    Leading whitespace of the output is ignored (`strip=True`), as evals strips completions;
    the comparison is case-sensitive unless `case_sensitive=False`.
    """

    case_sensitive: bool = True
    strip: bool = True

    def grade(self, ctx: GradeContext) -> Score:
        output = ctx.output.lstrip() if self.strip else ctx.output
        output = _fold(output, self.case_sensitive)
        options = self._options
        ok = any(output.startswith(_fold(t, self.case_sensitive)) for t in options)
        why = None if ok else f"output does not start with {_shown(options)}"
        return Score.from_bool(ok, rationale=why)


@dataclass
class contains_any(_TextsCheck):
    """The output contains at least one of `texts` (case-insensitive unless `case_sensitive`).

    openai/evals `Includes` is `contains_any(ideals, case_sensitive=True)`.
    """

    case_sensitive: bool = False

    def grade(self, ctx: GradeContext) -> Score:
        output = _fold(ctx.output, self.case_sensitive)
        options = self._options
        ok = any(_fold(t, self.case_sensitive) in output for t in options)
        why = None if ok else f"output contains none of {_shown(options)}"
        return Score.from_bool(ok, rationale=why)


@dataclass
class contains_all(_TextsCheck):
    """The output contains every one of `texts` (case-insensitive unless `case_sensitive`)."""

    case_sensitive: bool = False

    def grade(self, ctx: GradeContext) -> Score:
        output = _fold(ctx.output, self.case_sensitive)
        missing = [t for t in self._options if _fold(t, self.case_sensitive) not in output]
        why = None if not missing else f"output lacks {_shown(tuple(missing))}"
        return Score.from_bool(not missing, rationale=why)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """openai/evals' normalisation: lower-case, drop ASCII punctuation, then the articles
    "a", "an" and "the", then collapse whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


@dataclass
class fuzzy_match(_TextsCheck):
    """After `normalize_answer`, the output contains one of `texts` or is contained in it
    (openai/evals `FuzzyMatch`). An output that normalises to nothing matches only a text
    that normalises to nothing too.
    """

    def grade(self, ctx: GradeContext) -> Score:
        output = normalize_answer(ctx.output)
        options = self._options
        ok = any(_fuzzy_equal(output, normalize_answer(t)) for t in options)
        why = None if ok else f"output does not fuzzy-match {_shown(options)}"
        return Score.from_bool(ok, rationale=why)


def _fuzzy_equal(a: str, b: str) -> bool:
    if not a or not b:
        return a == b
    return a in b or b in a


def _check_schema(schema: Mapping[str, Any] | None, label: str) -> None:
    if schema is None:
        return
    from jsonschema import validators

    try:
        validators.validator_for(schema).check_schema(dict(schema))
    except Exception as exc:
        raise ValueError(f"{label}: schema: not a valid JSON Schema: {exc}") from None


def _schema_error(value: Any, schema: Mapping[str, Any]) -> str | None:
    from jsonschema import validators

    validator = validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    if not errors:
        return None
    where = "/".join(str(p) for p in errors[0].path) or "(root)"
    return f"at {where}: {errors[0].message}"


@dataclass
class is_json(Grader):
    """The whole output is JSON (optionally matching the JSON Schema `schema`).

    Strict, like promptfoo's `is-json`: a markdown code fence around the JSON fails
    (`valid_json` accepts one).
    """

    schema: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_schema(self.schema, "is_json")

    @property
    def name(self) -> str:
        return "is_json" if self.schema is None else "is_json(schema)"

    def grade(self, ctx: GradeContext) -> Score:
        try:
            value = json.loads(ctx.output)
        except ValueError as exc:
            return Score.from_bool(False, rationale=f"output is not JSON: {exc}")
        if self.schema is not None:
            problem = _schema_error(value, self.schema)
            if problem is not None:
                return Score.from_bool(False, rationale=f"JSON does not match the schema {problem}")
        return Score.from_bool(True)


def json_objects(text: str) -> list[Any]:
    """Every JSON object embedded in `text`, left to right (objects inside a found one are
    part of it, not found again)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        found.append(value)
        position = text.find("{", end)
    return found


@dataclass
class contains_json(Grader):
    """The output contains a JSON object somewhere (one matching `schema`, when given), like
    promptfoo's `contains-json`. Only objects count: a bare `[1]` in prose is not JSON output.
    """

    schema: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_schema(self.schema, "contains_json")

    @property
    def name(self) -> str:
        return "contains_json" if self.schema is None else "contains_json(schema)"

    def grade(self, ctx: GradeContext) -> Score:
        found = json_objects(ctx.output)
        if not found:
            return Score.from_bool(False, rationale="output contains no JSON object")
        if self.schema is None:
            return Score.from_bool(True)
        problems = [_schema_error(value, self.schema) for value in found]
        if any(p is None for p in problems):
            return Score.from_bool(True)
        return Score.from_bool(
            False,
            rationale=f"no JSON object in the output matches the schema (first: {problems[0]})",
        )


@dataclass
class json_equals(Grader):
    """The output parses as JSON equal to `expected` (promptfoo `equals` with an object)."""

    expected: Any

    @property
    def name(self) -> str:
        return f"json_equals({_short(json.dumps(self.expected), 40)})"

    def grade(self, ctx: GradeContext) -> Score:
        try:
            value = json.loads(ctx.output)
        except ValueError as exc:
            return Score.from_bool(False, rationale=f"output is not JSON: {exc}")
        ok = _strict_equal(value, self.expected)
        why = None if ok else f"JSON differs from {_short(json.dumps(self.expected))}"
        return Score.from_bool(ok, rationale=why)


def _strict_equal(a: Any, b: Any) -> bool:
    # JSON's true is not 1: Python's == says otherwise.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@dataclass
class levenshtein(Grader):
    """The output is at most `max_distance` edits (insertions, deletions, substitutions) away
    from `expected` (promptfoo `levenshtein`, whose `threshold` defaults to 5)."""

    expected: str
    max_distance: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.max_distance, int) or self.max_distance < 0:
            raise ValueError(
                f"levenshtein: max_distance must be a whole number >= 0, got {self.max_distance!r}"
            )

    @property
    def name(self) -> str:
        return f"levenshtein({_short(self.expected, 40)!r}, {self.max_distance})"

    def grade(self, ctx: GradeContext) -> Score:
        distance = edit_distance(ctx.output, self.expected, limit=self.max_distance)
        if distance is None:
            why = f"more than {self.max_distance} edits away from {_short(self.expected)!r}"
            return Score.from_bool(False, rationale=why)
        score = Score.from_bool(True)
        score.metadata["distance"] = distance
        return score


def edit_distance(a: str, b: str, *, limit: int | None = None) -> int | None:
    """The Levenshtein distance of `a` and `b`, or `None` when it is over `limit`.

    With a limit only a band of the table is computed, so a long output far from a short
    expected answer costs O(len × limit), not O(len²).
    """
    if len(a) < len(b):
        a, b = b, a
    if limit is not None and len(a) - len(b) > limit:
        return None
    big = len(a) + len(b) + 1
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        low = 1 if limit is None else max(1, i - limit)
        high = len(b) if limit is None else min(len(b), i + limit)
        current = [big] * (len(b) + 1)
        current[0] = i
        for j in range(low, high + 1):
            cost = 0 if char_a == b[j - 1] else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
        if limit is not None and min(current[max(0, low - 1) : high + 1]) > limit:
            return None
        previous = current
    distance = previous[len(b)]
    return None if limit is not None and distance > limit else distance


_ANSWER_LINE = re.compile(r"ANSWER\s*:\s*([A-Za-z](?:\s*,\s*[A-Za-z])*)\b", re.IGNORECASE)
_ONLY_LETTERS = re.compile(r"\(?[A-Za-z]\)?[.)]?(?:\s*,\s*\(?[A-Za-z]\)?[.)]?)*")


def answered_letters(output: str) -> set[str] | None:
    """The choice letters an answer picks, upper-cased: from its last `ANSWER: B` (or
    `ANSWER: A, C`), or from an output that is nothing but letters (`B`, `(B)`, `B.`, `A, C`);
    `None` when it picks none."""
    answers = _ANSWER_LINE.findall(output)
    if answers:
        chosen = answers[-1]
    elif _ONLY_LETTERS.fullmatch(output.strip()):
        chosen = output
    else:
        return None
    return {c.upper() for c in re.findall(r"[A-Za-z]", chosen)}


def _letters(letters: set[str] | frozenset[str]) -> str:
    return ", ".join(sorted(letters))


@dataclass
class choice_answer(Grader):
    """The answer to a multiple-choice question picks exactly `letters` (like inspect_ai's
    `choice` scorer).

    The answer is read from an `ANSWER: B` line (several letters: `ANSWER: A, C`), the form
    inspect_ai's multiple-choice prompt asks for, or from an output that is only the letter.
    """

    letters: str | Sequence[str]
    _expected: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        letters = _texts(self.letters, "choice_answer")
        for letter in letters:
            if len(letter) != 1 or not letter.isalpha():
                raise ValueError(f"choice_answer: expected single letters, got {letter!r}")
        self._expected = frozenset(letter.upper() for letter in letters)

    @property
    def name(self) -> str:
        return f"choice_answer({_letters(self._expected)})"

    def grade(self, ctx: GradeContext) -> Score:
        picked = answered_letters(ctx.output)
        if picked is None:
            return Score.from_bool(False, rationale="no 'ANSWER: <letter>' in the output")
        ok = picked == self._expected
        why = None if ok else f"answered {_letters(picked)}; expected {_letters(self._expected)}"
        return Score.from_bool(ok, rationale=why)


class none_of(Grader):
    """Passes when no part passes: the negation of a check (promptfoo's `not-` prefix).

    A part that errors (or is unknown) makes the whole score an error (or unknown): a check
    that could not run proves nothing either way.
    """

    def __init__(self, *graders: GraderLike, name: str | None = None) -> None:
        if not graders:
            raise ValueError("none_of: needs at least one grader")
        self.parts = [as_grader(g) for g in graders]
        self._name = name

    @property
    def name(self) -> str:
        return self._name or "none_of(" + ", ".join(p.name for p in self.parts) + ")"

    async def grade(self, ctx: GradeContext) -> Score:
        scores = await _grade_all(self.parts, ctx)
        verdicts = {s.verdict for s in scores}
        assertions = [s.as_assertion() for s in scores]
        if Verdict.PASS in verdicts:
            passed = ", ".join(s.name for s in scores if s.passed)
            return Score(
                value=0.0,
                verdict=Verdict.FAIL,
                rationale=f"passed: {passed}",
                assertions=assertions,
            )
        for broken in (Verdict.ERROR, Verdict.UNKNOWN):
            if broken in verdicts:
                return Score(verdict=broken, rationale=f"a part is {broken}", assertions=assertions)
        return Score(value=1.0, verdict=Verdict.PASS, assertions=assertions)
