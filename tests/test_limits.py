"""The documented limits of ids, trial counts and timeouts, in Python and in suite files:
booleans are never numbers, and a value over a limit is refused before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trialkit import Runner, Suite, Task
from trialkit.cli.main import cli
from trialkit.loaders.errors import SuiteFileError
from trialkit.loaders.suite_file import load_suite_file
from trialkit.models.base import GenerationConfig
from trialkit.run.adaptive import Adaptive
from trialkit.task import MAX_ID_CHARS, MAX_TIMEOUT_S, MAX_TRIALS, SuiteError

BAD_IDS = ["a/b", "a#b", "tab\there", "new\nline", "del\x7f", "c1\x85", "nul\x00", "", "  "]
BAD_IDS += ["x" * (MAX_ID_CHARS + 1)]
BAD_TRIALS: list[Any] = [True, False, 0, -1, MAX_TRIALS + 1, 1_000_000_000_000, 1.5, "3"]
BAD_TIMEOUTS: list[Any] = [True, False, 0, -1, MAX_TIMEOUT_S + 1, float("inf"), float("nan"), "5"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_ids_are_refused_for_suites_and_tasks(bad: str) -> None:
    with pytest.raises(SuiteError, match=r"task.*: id: "):
        Task(id=bad, input="x")
    with pytest.raises(SuiteError, match=r"suite.*: id: "):
        Suite(id=bad, tasks=[])


@pytest.mark.parametrize("bad", BAD_TRIALS)
def test_bad_trial_counts_are_refused(bad: Any) -> None:
    with pytest.raises(
        SuiteError, match=f"trials: must be a whole number from 1 to {MAX_TRIALS:,}"
    ):
        Task(id="t", input="x", trials=bad)
    with pytest.raises(SuiteError, match="trials: must be"):
        Suite(id="s", tasks=[], trials=bad)
    with pytest.raises(ValueError, match="trials"):
        Runner(trials=bad)


@pytest.mark.parametrize("bad", BAD_TIMEOUTS)
def test_bad_timeouts_are_refused(bad: Any) -> None:
    with pytest.raises(SuiteError, match="timeout: must be a number of seconds > 0"):
        Task(id="t", input="x", timeout=bad)
    with pytest.raises(SuiteError, match="timeout: must be"):
        Suite(id="s", tasks=[], timeout=bad)
    with pytest.raises(ValueError, match="timeout"):
        Runner(timeout=bad)


def test_the_limits_themselves_are_allowed() -> None:
    task = Task(id="x" * MAX_ID_CHARS, input="x", trials=MAX_TRIALS, timeout=MAX_TIMEOUT_S)
    Suite(id="s" * MAX_ID_CHARS, tasks=[task], trials=1, timeout=0.001)
    Task(id="unicode-é-名", input="x", timeout=1)
    Adaptive(max_trials=MAX_TRIALS)
    with pytest.raises(SuiteError, match="max_trials"):
        Adaptive(max_trials=MAX_TRIALS + 1)


@pytest.mark.parametrize("field", ["temperature", "max_tokens", "top_p", "seed"])
def test_generation_parameters_are_never_booleans(field: str) -> None:
    with pytest.raises(ValueError, match="Input should be a number"):
        GenerationConfig.model_validate({field: True})
    assert getattr(GenerationConfig.model_validate({field: 1}), field) == 1


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "suite.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SuiteFileError) as caught:
        load_suite_file(path)
    return [f"{p.line}: {p.field}: {p.message}" for p in caught.value.problems]


SUITE = "id: s\nmodel: scripted/x\ntasks:\n- id: a\n  input: hi\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('id: "a/b"\nmodel: scripted/x\ntasks: []\n', "1: id: must not contain"),
        ('id: "a#b"\nmodel: scripted/x\ntasks: []\n', "1: id: must not contain"),
        ('id: "a\\x01"\nmodel: scripted/x\ntasks: []\n', "1: id: must not contain"),
        ('id: s\nmodel: scripted/x\ntasks: [{id: "a\\x7f", input: x}]\n', "tasks[0].id: must"),
        ('id: s\nmodel: scripted/x\ntasks: [{id: "a\\x85", input: x}]\n', "tasks[0].id: must"),
        (SUITE + "timeout: true\n", "6: timeout: must be a number, got true"),
        (SUITE + "trials: true\n", "6: trials: Input should be a valid integer"),
        (SUITE + "trials: 1000000000000\n", "6: trials: Input should be less than or equal to"),
        (SUITE + "timeout: 100000\n", "6: timeout: Input should be less than or equal to"),
        (SUITE + "  timeout: false\n", "6: tasks[0].timeout: must be a number, got false"),
        (SUITE + "  trials: 10001\n", "6: tasks[0].trials: Input should be less than"),
        (SUITE + "  config: {temperature: true}\n", "6: tasks[0].config.temperature: Input should"),
        (
            SUITE + "  graders: [{weighted: {graders: [{grader: {contains: x}, weight: true}]}}]\n",
            "weight: must be a number, got true",
        ),
        (SUITE + "  graders: [{judge: {rubric: r, pass_at: true}}]\n", "pass_at: must be a number"),
        (SUITE + "harness: {command: [x], timeout: true}\n", "6: harness.timeout: must be"),
    ],
)
def test_suite_files_refuse_what_the_docs_forbid(tmp_path: Path, text: str, expected: str) -> None:
    problems = _problems(tmp_path, text)
    assert any(expected in problem for problem in problems), problems


def test_a_huge_trial_count_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    store = f"sqlite:///{tmp_path / 'store.db'}"
    for args in (["--trials", "1000000000000"], ["--timeout", "1e12"]):
        result = CliRunner().invoke(cli, ["run", str(suite), *args, "--store", store])
        assert result.exit_code == 2, result.output
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: ")
    assert not (tmp_path / "store.db").exists()
