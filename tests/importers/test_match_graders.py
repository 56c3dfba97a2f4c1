import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.graders._ctx import make_ctx
from trialkit import Score, Verdict, graders
from trialkit.graders.base import GradeContext, Grader, run_grader
from trialkit.graders.match import (
    answered_letters,
    choice_answer,
    contains_all,
    contains_any,
    contains_json,
    edit_distance,
    fuzzy_match,
    is_json,
    json_equals,
    json_objects,
    levenshtein,
    none_of,
    normalize_answer,
    starts_with,
)


def grade(g: Grader, output: str | None) -> Score:
    return anyio.run(run_grader, g, make_ctx(output))


def passes(g: Grader, output: str) -> bool:
    return grade(g, output).verdict is Verdict.PASS


# --- starts_with: openai/evals Match ------------------------------------------------------


def test_starts_with_ignores_leading_whitespace_and_is_case_sensitive() -> None:
    assert passes(starts_with("Paris"), "  \nParis is the capital.")
    assert not passes(starts_with("Paris", strip=False), "  Paris")
    assert not passes(starts_with("Paris"), "paris")
    assert passes(starts_with("Paris", case_sensitive=False), "PARIS!")
    assert not passes(starts_with("Paris"), "The capital is Paris")


def test_starts_with_any_of_several() -> None:
    g = starts_with(["George Washington", "Washington"])
    assert passes(g, "Washington, of course")
    s = grade(g, "Lincoln")
    assert s.rationale == "output does not start with ['George Washington', 'Washington']"
    assert g.name == "starts_with(['George Washington', 'Washington'])"
    assert starts_with("x").name == "starts_with('x')"


def test_text_lists_are_checked() -> None:
    with pytest.raises(ValueError, match="starts_with: needs at least one text"):
        starts_with([])
    with pytest.raises(TypeError, match="contains_any: expected strings, got int"):
        contains_any(["a", 1])  # type: ignore[list-item]


# --- contains_any / contains_all -----------------------------------------------------------


def test_contains_any_is_evals_includes_when_case_sensitive() -> None:
    assert passes(contains_any(["paris", "lutetia"]), "It is PARIS")
    assert not passes(contains_any(["paris"], case_sensitive=True), "It is PARIS")
    assert passes(contains_any(["Tokyo", "東京"], case_sensitive=True), "首都は東京です")
    s = grade(contains_any(["a1", "b2"]), "nothing")
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "output contains none of ['a1', 'b2']")


def test_contains_all_names_what_is_missing() -> None:
    assert passes(contains_all(["red", "blue"]), "Blue and RED")
    s = grade(contains_all(["red", "blue", "green"]), "red only")
    assert s.rationale == "output lacks ['blue', 'green']"
    assert not passes(contains_all(["Red"], case_sensitive=True), "red")


# --- fuzzy_match: openai/evals FuzzyMatch --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("an apple a day", "apple day"),
        ("Theatre of Anna", "theatre of anna"),  # articles only as whole words
        ("the-end", "theend"),  # punctuation goes first, so "the" is no longer a word
        ("A.", ""),
        ("¿Qué?", "¿qué"),  # only ASCII punctuation is removed, as in evals
        ("ÉCOLE\tNormale\n", "école normale"),
    ],
)
def test_normalize_answer(text: str, normal: str) -> None:
    assert normalize_answer(text) == normal


@pytest.mark.parametrize(
    ("output", "ideal", "ok"),
    [
        ("george washington.", "George Washington", True),
        ("Paris", "The city of Paris, France", True),  # the output inside the ideal
        ("It was George Washington, I think", "george washington", True),
        ("Paris", "London", False),
        ("", "Paris", False),  # an empty output matches only an empty ideal
        ("The.", "a", True),  # both normalise to nothing
        ("!!!", "Paris", False),
    ],
)
def test_fuzzy_match(output: str, ideal: str, ok: bool) -> None:
    assert passes(fuzzy_match(ideal), output) is ok


def test_fuzzy_match_any_of_several() -> None:
    assert passes(fuzzy_match(["Lutetia", "Paris"]), "paris")
    assert grade(fuzzy_match("x"), "y").rationale == "output does not fuzzy-match 'x'"


# --- JSON ----------------------------------------------------------------------------------


def test_is_json_is_strict_about_fences() -> None:
    assert passes(is_json(), " [1, 2] \n")
    assert not passes(is_json(), '```json\n{"a": 1}\n```')
    assert passes(graders.valid_json(), '```json\n{"a": 1}\n```')  # the lenient one
    schema = {"type": "object", "required": ["city"]}
    assert passes(is_json(schema), '{"city": "Paris"}')
    s = grade(is_json(schema), '{"town": "Paris"}')
    assert s.rationale == "JSON does not match the schema at (root): 'city' is a required property"
    with pytest.raises(ValueError, match="is_json: schema: not a valid JSON Schema"):
        is_json({"type": 12})


def test_json_objects_finds_objects_in_prose() -> None:
    text = 'Sure! {"a": "}"} and then {broken} and {"b": {"c": [1]}} and [1, 2]'
    assert json_objects(text) == [{"a": "}"}, {"b": {"c": [1]}}]


def test_contains_json() -> None:
    assert passes(contains_json(), 'Here you go: {"city": "Paris"} - done')
    assert not passes(contains_json(), "a list [1, 2] is not an object")
    schema = {"type": "object", "required": ["city"]}
    assert passes(contains_json(schema), '{"x": 1} then {"city": "Rome"}')
    s = grade(contains_json(schema), '{"x": 1}')
    assert s.verdict is Verdict.FAIL
    assert s.rationale is not None and "no JSON object in the output matches" in s.rationale


def test_json_equals_compares_as_json() -> None:
    assert passes(json_equals({"a": [1, True]}), '{"a": [1.0, true]}')
    assert not passes(json_equals({"a": 1}), '{"a": true}')  # true is not 1 in JSON
    assert not passes(json_equals({"a": 1}), '{"a": 1, "b": 2}')
    assert grade(json_equals([1]), "nope").rationale is not None


# --- levenshtein ---------------------------------------------------------------------------


def test_levenshtein() -> None:
    assert edit_distance("kitten", "sitting") == 3
    assert passes(levenshtein("sitting", max_distance=3), "kitten")
    s = grade(levenshtein("sitting", max_distance=2), "kitten")
    assert s.rationale == "more than 2 edits away from 'sitting'"
    assert grade(levenshtein("abc"), "abd").metadata == {"distance": 1}
    assert passes(levenshtein("hello"), "hello!!!!!")  # the default allows 5 edits
    assert not passes(levenshtein("hello"), "hello world")
    with pytest.raises(ValueError, match="max_distance must be a whole number >= 0"):
        levenshtein("x", max_distance=-1)


def _naive(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


@given(st.text("abc", max_size=12), st.text("abc", max_size=12), st.integers(0, 8))
def test_banded_edit_distance_agrees_with_the_full_table(a: str, b: str, limit: int) -> None:
    distance = _naive(a, b)
    assert edit_distance(a, b) == distance
    assert edit_distance(a, b, limit=limit) == (distance if distance <= limit else None)


# --- choice_answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "letters"),
    [
        ("ANSWER: B", {"B"}),
        ("Let me think.\nanswer : b", {"B"}),
        ("ANSWER: A, C", {"A", "C"}),
        ("ANSWER: A\nWait, no.\nANSWER: D", {"D"}),
        ("B", {"B"}),
        ("(B)", {"B"}),
        (" c. ", {"C"}),
        ("I think it is B", None),
        ("Reply with 'ANSWER: <letter>'", None),
    ],
)
def test_answered_letters(output: str, letters: set[str] | None) -> None:
    assert answered_letters(output) == letters


def test_choice_answer_needs_exactly_the_target_letters() -> None:
    assert passes(choice_answer("B"), "ANSWER: B")
    assert passes(choice_answer(["c", "A"]), "ANSWER: A, C")
    assert not passes(choice_answer(["A", "C"]), "ANSWER: A")
    s = grade(choice_answer("B"), "ANSWER: C")
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "answered C; expected B")
    assert grade(choice_answer("B"), "Canberra").rationale == (
        "no 'ANSWER: <letter>' in the output"
    )
    assert choice_answer(["b", "A"]).name == "choice_answer(A, B)"
    with pytest.raises(ValueError, match="choice_answer: expected single letters, got 'AB'"):
        choice_answer("AB")


# --- none_of: promptfoo's not- -------------------------------------------------------------


def test_none_of_negates() -> None:
    g = none_of(graders.contains("berlin"), name="not contains('berlin')")
    assert passes(g, "Paris")
    s = grade(g, "Berlin")
    assert (s.verdict, s.rationale, s.name) == (
        Verdict.FAIL,
        "passed: contains('berlin')",
        "not contains('berlin')",
    )
    assert [a.name for a in s.assertions] == ["contains('berlin')"]
    assert none_of(graders.contains("a"), graders.contains("b")).name == (
        "none_of(contains('a'), contains('b'))"
    )


def test_none_of_keeps_errors_and_unknowns() -> None:
    def broken(ctx: GradeContext) -> bool:
        raise RuntimeError("boom")

    def unsure(ctx: GradeContext) -> Score:
        return Score(verdict=Verdict.UNKNOWN)

    assert grade(none_of(broken), "x").verdict is Verdict.ERROR
    assert grade(none_of(unsure), "x").verdict is Verdict.UNKNOWN
    assert grade(none_of(broken, graders.contains("x")), "x").verdict is Verdict.FAIL
    with pytest.raises(ValueError, match="none_of: needs at least one grader"):
        none_of()
