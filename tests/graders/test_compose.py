import re

import anyio
import pytest

from tests.graders._ctx import make_ctx
from trialkit import GradeContext, Score, Verdict, graders
from trialkit.graders.base import run_grader


def grade(g: graders.Grader, output: str = "Paris is the capital") -> Score:
    return anyio.run(run_grader, g, make_ctx(output))


def boom(ctx: GradeContext) -> bool:
    raise RuntimeError("grader bug")


def test_all_of_keeps_each_part() -> None:
    s = grade(graders.all_of(graders.contains("paris"), graders.contains("london")))
    assert s.verdict is Verdict.FAIL
    assert [(a.name, a.verdict) for a in s.assertions] == [
        ("contains('paris')", Verdict.PASS),
        ("contains('london')", Verdict.FAIL),
    ]
    assert s.assertions[1].rationale == "output does not contain 'london'"
    assert s.rationale == "not passed: contains('london')"
    assert s.value == 0.5


def test_all_of_fail_beats_error_and_error_beats_pass() -> None:
    assert grade(graders.all_of(boom, graders.contains("nope"))).verdict is Verdict.FAIL
    assert grade(graders.all_of(boom, graders.contains("paris"))).verdict is Verdict.ERROR


def test_any_of() -> None:
    s = grade(graders.any_of(graders.contains("london"), graders.contains("paris")))
    assert s.verdict is Verdict.PASS
    assert len(s.assertions) == 2
    assert grade(graders.any_of(graders.contains("london"))).verdict is Verdict.FAIL
    assert grade(graders.any_of(boom, graders.contains("paris"))).verdict is Verdict.PASS
    assert grade(graders.any_of(boom, graders.contains("rome"))).verdict is Verdict.ERROR


def test_weighted_mean() -> None:
    g = graders.weighted(
        (graders.contains("paris"), 3.0), (graders.contains("london"), 1.0), pass_at=0.7
    )
    s = grade(g)
    assert s.value == 0.75
    assert s.verdict is Verdict.PASS
    assert [a.name for a in s.assertions] == ["contains('paris')", "contains('london')"]
    strict = graders.weighted(
        (graders.contains("paris"), 1), (graders.contains("rome"), 1), pass_at=0.8
    )
    s = grade(strict)
    assert (s.verdict, s.value) == (Verdict.FAIL, 0.5)
    assert s.rationale == "weighted value 0.500 is under 0.8"


def test_weighted_with_an_erroring_part_is_an_error() -> None:
    s = grade(graders.weighted((graders.contains("paris"), 1), (boom, 1)))
    assert s.verdict is Verdict.ERROR
    assert s.value is None


def test_nested_composition_keeps_sub_assertions() -> None:
    inner = graders.any_of(graders.contains("rome"), graders.contains("paris"))
    s = grade(graders.all_of(inner, graders.not_contains("berlin")))
    assert s.verdict is Verdict.PASS
    assert [a.name for a in s.assertions[0].assertions] == ["contains('rome')", "contains('paris')"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: graders.all_of(), "all_of: needs at least one grader"),
        (lambda: graders.weighted(), "weighted: needs at least one"),
        (lambda: graders.weighted((graders.contains("a"), -1)), "weight must be >= 0"),
        (lambda: graders.weighted((graders.contains("a"), 0)), "the weights sum to zero"),
        (lambda: graders.weighted(graders.contains("a")), "expected (grader, weight) pairs"),  # type: ignore[arg-type]
    ],
)
def test_bad_compositions(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make()  # type: ignore[operator]
