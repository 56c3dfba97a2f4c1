"""The plugin's settings in the one order: `--trialkit-*`, then the environment, then the
`trialkit_*` ini key, then `[tool.trialkit]`, then the suite; a setting declared once is an
option and an ini key of the plugin."""

from __future__ import annotations

import pytest

from tests.run.fake_option import register

EVAL = """
from trialkit import Suite, Task

answer = Suite(id="answer", kind="capability", trials=1, model="scripted/suite",
               tasks=[Task(id="who", input="Who answers?")])
"""


def over(pytester: pytest.Pytester, *args: str) -> str:
    """The trials of the session's run, from its summary line."""
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    [line] = [line for line in result.outlines if "tasks passed" in line]
    return line.split(" over ")[1].split(" trials")[0]


def test_trials_from_the_flag_then_environment_then_ini_then_pyproject_then_suite(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(eval_answer=EVAL)
    assert over(pytester) == "1"
    pytester.makepyprojecttoml("[tool.trialkit]\ntrials = 2\n")
    assert over(pytester) == "2"
    pytester.makeini("[pytest]\ntrialkit_trials = 3\n")
    assert over(pytester) == "3"
    monkeypatch.setenv("TRIALKIT_TRIALS", "4")
    assert over(pytester) == "4"
    assert over(pytester, "--trialkit-trials", "5") == "5"


def test_pyproject_is_found_above_the_rootdir_and_paths_are_its_own(
    pytester: pytest.Pytester,
) -> None:
    project = pytester.path
    (project / ".git").mkdir()
    (project / "pyproject.toml").write_text('[tool.trialkit]\nstore = "runs/evals.db"\n')
    inner = project / "evals"
    inner.mkdir()
    (inner / "pytest.ini").write_text("[pytest]\n")  # the rootdir is evals/
    (inner / "eval_answer.py").write_text(EVAL)
    result = pytester.runpytest("-p", "no:cacheprovider", str(inner))
    result.assert_outcomes(passed=1)
    assert (project / "runs" / "evals.db").is_file()
    assert not (inner / ".trialkit").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "trails = 3",
            "ERROR: pyproject.toml:2: [[]tool.trialkit]: unknown setting trails (known: *); "
            "did you mean trials?",
        ),
        (
            "concurrency = 'many'",
            "ERROR: pyproject.toml:2: [[]tool.trialkit] concurrency: expected a whole number "
            ">= 1, got 'many'",
        ),
        (  # a key for trialkit run only: pytest leaves it alone, but checks it
            "max-cost = 'lots'",
            "ERROR: pyproject.toml:2: [[]tool.trialkit] max-cost: expected an amount of dollars "
            "> 0, got 'lots'",
        ),
        (
            "offline = 1",
            "ERROR: pyproject.toml:2: [[]tool.trialkit] offline: expected true or false*",
        ),
    ],
)
def test_a_bad_pyproject_setting_is_a_usage_error_naming_file_line_and_key(
    pytester: pytest.Pytester, table: str, message: str
) -> None:
    pytester.makepyprojecttoml(f"[tool.trialkit]\n{table}\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_bad_environment_value_is_a_usage_error_naming_the_variable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(eval_answer=EVAL)
    monkeypatch.setenv("TRIALKIT_TIMEOUT", "soon")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: TRIALKIT_TIMEOUT: expected a number of seconds > 0, got 'soon'"]
    )


def test_a_declared_setting_is_an_option_and_an_ini_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = register(monkeypatch)
    help_text = pytester.runpytest("-p", "no:cacheprovider", "--help").stdout.str()
    assert "--trialkit-fake-knob=N" in help_text
    assert "trialkit_fake_knob (string):" in help_text
    pytester.makepyfile(eval_answer=EVAL)
    pytester.makepyprojecttoml("[tool.trialkit]\nfake-knob = 2\n")
    over(pytester)
    assert seen[-1] == (2, "pyproject.toml:2: [tool.trialkit] fake-knob")
    pytester.makeini("[pytest]\ntrialkit_fake_knob = 3\n")
    over(pytester)
    assert seen[-1] == (3, "trialkit_fake_knob")
    monkeypatch.setenv("TRIALKIT_FAKE_KNOB", "4")
    over(pytester)
    assert seen[-1] == (4, "TRIALKIT_FAKE_KNOB")
    over(pytester, "--trialkit-fake-knob", "5")
    assert seen[-1] == (5, "--trialkit-fake-knob")
