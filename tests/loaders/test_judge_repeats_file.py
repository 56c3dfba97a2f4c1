"""`repeats:` of a judge in a suite file: loaded onto the grader, checked, and in the schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.loaders._files import problems_of, write
from tests.loaders.test_schema import _validator
from trialkit.graders.judge import judge
from trialkit.loaders.suite_file import load_suite_file

SUITE = """
id: s
tasks:
  - id: a
    input: x
    graders: [{judge: {rubric: Names Paris., model: scripted/judge, repeats: REPEATS}}]
"""


def test_repeats_reach_the_judge(tmp_path: Path) -> None:
    write(tmp_path, {"suite.yaml": SUITE.replace("REPEATS", "5")})
    (grader,) = load_suite_file(tmp_path).tasks[0].graders
    assert isinstance(grader, judge)
    assert grader.repeats == 5
    write(tmp_path, {"suite.yaml": SUITE.replace(", repeats: REPEATS", "")})
    (grader,) = load_suite_file(tmp_path).tasks[0].graders
    assert isinstance(grader, judge) and grader.repeats == 1


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("0", "Input should be greater than or equal to 1, got a number 0"),
        ("101", "Input should be less than or equal to 100, got a number 101"),
        ("true", "Input should be a valid integer, got a boolean"),
        ("2.5", "Input should be a valid integer, got a number 2.5"),
    ],
)
def test_bad_repeats_are_one_line_naming_the_field(
    tmp_path: Path, given: str, message: str
) -> None:
    write(tmp_path, {"suite.yaml": SUITE.replace("REPEATS", given)})
    assert problems_of(tmp_path) == [f"suite.yaml:5: tasks[0].graders[0].judge.repeats: {message}"]


def test_the_schema_knows_repeats() -> None:
    validator = _validator("suite.schema.json")
    good = {
        "id": "s",
        "tasks": [{"id": "a", "input": "x", "graders": [{"judge": {"rubric": "r", "repeats": 3}}]}],
    }
    assert list(validator.iter_errors(good)) == []
    good["tasks"][0]["graders"][0]["judge"]["repeats"] = 0  # type: ignore[index]
    assert list(validator.iter_errors(good)) != []
