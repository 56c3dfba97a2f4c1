import anyio
import pytest

from tests.graders._ctx import make_ctx
from trialkit import Score, Verdict, graders
from trialkit.graders.base import run_grader


def grade(g: graders.Grader, output: str | None, **kw: object) -> Score:
    return anyio.run(run_grader, g, make_ctx(output, **kw))  # type: ignore[arg-type]


def test_contains_is_case_insensitive_by_default() -> None:
    assert grade(graders.contains("paris"), "It is PARIS.").verdict is Verdict.PASS
    s = grade(graders.contains("paris", case_sensitive=True), "It is PARIS.")
    assert s.verdict is Verdict.FAIL
    assert s.rationale == "output does not contain 'paris'"
    assert s.name == "contains('paris')"
    assert s.value == 0.0


def test_contains_folds_unicode_case() -> None:
    assert grade(graders.contains("straße"), "STRASSE").verdict is Verdict.PASS


def test_not_contains() -> None:
    assert grade(graders.not_contains("berlin"), "Paris").verdict is Verdict.PASS
    s = grade(graders.not_contains("berlin"), "Not Berlin")
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "output contains 'berlin'")


def test_no_output_is_empty_text() -> None:
    assert grade(graders.contains("x"), None).verdict is Verdict.FAIL
    assert grade(graders.not_contains("x"), None).verdict is Verdict.PASS


def test_matches_searches_anywhere_and_rejects_bad_patterns() -> None:
    assert grade(graders.matches(r"\b42\b"), "The answer is 42.").passed
    assert not grade(graders.matches(r"^42"), "The answer is 42.").passed
    assert grade(graders.matches("hello", ignore_case=True), "HeLLo").passed
    with pytest.raises(ValueError, match="matches: pattern: invalid regular expression"):
        graders.matches("(")


def test_equals_strips_by_default() -> None:
    assert grade(graders.equals("42"), " 42\n").passed
    assert not grade(graders.equals("42", strip=False), " 42\n").passed
    assert grade(graders.equals("Yes", case_sensitive=False), "yes").passed
    s = grade(graders.equals("42"), "41")
    assert s.rationale == "expected '42', got '41'"


@pytest.mark.parametrize(
    "output",
    ['{"city": "Paris"}', '```json\n{"city": "Paris"}\n```', '  ```\n{"city": "Paris"}```  '],
)
def test_valid_json_accepts_one_fence(output: str) -> None:
    assert grade(graders.valid_json(where=lambda v: v["city"] == "Paris"), output).passed


def test_valid_json_failures_say_why() -> None:
    s = grade(graders.valid_json(), "Sure! {not json}")
    assert s.verdict is Verdict.FAIL
    assert s.rationale is not None and s.rationale.startswith("output is not JSON:")
    double = '```json\n```json\n{"a": 1}\n```\n```'
    assert not grade(graders.valid_json(), double).passed

    def has_city(value: object) -> bool:
        return isinstance(value, dict) and "city" in value

    s = grade(graders.valid_json(where=has_city), '{"town": "x"}')
    assert s.rationale == "JSON does not satisfy has_city"


def test_valid_json_schema() -> None:
    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    assert grade(graders.valid_json(schema=schema), '{"n": 3}').passed
    s = grade(graders.valid_json(schema=schema), '{"n": "three"}')
    assert s.verdict is Verdict.FAIL
    assert s.rationale == "JSON does not match the schema at n: 'three' is not of type 'integer'"
    with pytest.raises(ValueError, match="valid_json: schema: not a valid JSON Schema"):
        graders.valid_json(schema={"type": "nonsense"})


def test_predicate_uses_its_description_and_pass_at() -> None:
    short = graders.predicate("answer is short", lambda ctx: len(ctx.output) < 10)
    assert short.name == "answer is short"
    assert grade(short, "tiny").passed
    ratio = graders.predicate("ratio", lambda ctx: 0.7, pass_at=0.6)
    s = grade(ratio, "x")
    assert (s.verdict, s.value) == (Verdict.PASS, 0.7)


def test_predicate_that_raises_is_an_error_not_a_fail() -> None:
    s = grade(graders.predicate("boom", lambda ctx: 1 / 0), "x")
    assert s.verdict is Verdict.ERROR
    assert s.error is not None and s.error.type == "ZeroDivisionError"
    assert s.error.phase == "grading"


def test_agent_failed() -> None:
    g = graders.agent_failed("will not")
    assert not grade(g, "done").passed
    assert grade(g, None, failed=True, failure="Refusal: I will not.").passed
    s = grade(g, None, failed=True, failure="crash")
    assert s.rationale == "the agent failed, but not with 'will not': 'crash'"
