from pathlib import Path

from trialkit import run_sync
from trialkit.loaders import load_suite_file, validate_suite_file

SUITE = """id: m
model: scripted/echo
tasks:
  - id: good
    input: Paris is big
    graders:
      - starts_with: [Paris, Lyon]
      - contains_any: {texts: [big, small]}
      - contains_all: [paris, big]
      - fuzzy_match: paris is big!
      - levenshtein: {expected: Paris is bog, max_distance: 1}
  - id: bad
    input: Rome
    graders:
      - starts_with: {texts: rome, case_sensitive: true}
"""


def test_the_importers_graders_are_available_by_short_name(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE)
    report = run_sync(load_suite_file(tmp_path))
    assert report.task("good").verdict == "pass"
    assert report.task("good").results[0].scores[0].name.startswith("starts_with")
    assert report.task("bad").verdict == "fail"


def test_bad_arguments_are_problems(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "id: m\nmodel: scripted/echo\ntasks:\n  - id: a\n    input: x\n    graders:\n"
        "      - levenshtein: {expected: x, max_distance: -1}\n"
    )
    (problem,) = validate_suite_file(tmp_path)
    assert problem.line == 7
    assert "max_distance" in str(problem)
