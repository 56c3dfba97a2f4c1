"""The stored run of each suite, pytest-xdist, and the options (flags, ini, pyproject, env)."""

from __future__ import annotations

import pytest

from tests.pytest_plugin.conftest import default_store, stored_runs

ANSWER = """
from trialkit import Suite, Task

answer = Suite(id="answer", kind="capability", tasks=[Task(id="who", input="Who answers?")])
"""


def test_one_stored_run_per_suite_with_every_trial(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest("-p", "no:cacheprovider", "--trialkit-name", "nightly")
    runs = stored_runs(default_store(capitals))
    assert set(runs) == {"capitals", "explore"}
    capitals_run = runs["capitals"]
    assert capitals_run.run.name == "nightly"
    assert capitals_run.run.status == "completed"
    assert capitals_run.suite.kind.value == "regression"
    assert [(t.id, t.trials, t.passed, t.failed, t.errors) for t in capitals_run.tasks] == [
        ("france", 3, 3, 0, 0),
        ("spain", 3, 2, 1, 0),
        ("crash", 3, 0, 0, 3),
    ]
    assert capitals_run.run.config["source"]["target"] == "eval_capitals.py:capitals"
    assert [t.trials for t in runs["explore"].tasks] == [4, 4]
    run_id = capitals_run.run.id
    result.stdout.fnmatch_lines(
        [
            f"suite capitals (regression), run {run_id}",
            "  1/3 tasks passed, pass rate 83.3% (95% CI 0.0%-100.0%) over 9 trials, pass@1 0.83, "
            "pass@3 1.00, pass^3 0.50, 3 errors, cost n/a",
            f"  see it: trialkit report {run_id} --store {default_store(capitals)}",
        ]
    )


def test_store_none_keeps_nothing(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest(
        "-p", "no:cacheprovider", "-k", "explore", "--trialkit-store", "none"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["suite explore (capability), run *", "  not stored (--trialkit-store none)"]
    )
    assert not (capitals.path / ".trialkit").exists()


def test_a_store_path_on_the_command_line(capitals: pytest.Pytester) -> None:
    capitals.runpytest(
        "-p", "no:cacheprovider", "-k", "explore", "--trialkit-store", "runs/evals.db"
    )
    assert set(stored_runs(capitals.path / "runs" / "evals.db")) == {"explore"}
    assert not default_store(capitals).exists()


def test_xdist_workers_add_to_one_run_per_suite(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["suite capitals (regression), run * (trials from 2 xdist workers)"]
    )
    runs = stored_runs(default_store(capitals))
    assert set(runs) == {"capitals", "explore"}
    assert runs["capitals"].run.status == "completed"
    assert [(t.id, t.trials, t.passed) for t in runs["capitals"].tasks] == [
        ("france", 3, 3),
        ("spain", 3, 2),
        ("crash", 3, 0),
    ]
    assert runs["capitals"].summary.trials == 9
    assert runs["explore"].summary.trials == 8


def _who_answered(pytester: pytest.Pytester, *args: str) -> str | None:
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    [run] = stored_runs(default_store(pytester)).values()
    (default_store(pytester)).unlink()
    return run.tasks[0].results[0].output


def test_options_come_from_the_flag_then_environment_then_ini_then_pyproject(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(eval_answer=ANSWER)
    pytester.makepyprojecttoml('[tool.trialkit]\nmodel = "scripted/pyproject"\ntrials = 2\n')
    assert _who_answered(pytester) == "pyproject"
    pytester.makeini("[pytest]\ntrialkit_model = scripted/ini\n")
    assert _who_answered(pytester) == "ini"
    monkeypatch.setenv("TRIALKIT_MODEL", "scripted/environment")
    assert _who_answered(pytester) == "environment"
    assert _who_answered(pytester, "--trialkit-model", "scripted/flag") == "flag"


def test_pyproject_settings_apply(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(eval_answer=ANSWER)
    pytester.makepyprojecttoml(
        '[tool.trialkit]\nmodel = "scripted/pyproject"\ntrials = 3\n'
        "[tool.pytest.ini_options]\ntrialkit_trials = 2\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*over 2 trials*"])  # the ini setting wins over [tool.trialkit]


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--trialkit-trials", "0"], "", "--trialkit-trials: expected a whole number >= 1*"),
        (
            ["--trialkit-cache-mode", "sometimes", "--trialkit-cache", "c"],
            "",
            "--trialkit-cache-mode: expected one of live, record, replay, auto, got 'sometimes'",
        ),
        (
            ["--trialkit-cache-mode", "replay"],
            "",
            "--trialkit-cache-mode replay needs --trialkit-cache DIR*",
        ),
        (
            ["--trialkit-timeout", "-1"],
            "",
            "--trialkit-timeout: expected a number of seconds > 0, got '-1'",
        ),
        (
            [],
            "trialkit_concurrency = many",
            "trialkit_concurrency: expected a whole number >= 1, got 'many'",
        ),
        ([], "trialkit_offline = maybe", "trialkit_offline: expected true or false, got 'maybe'"),
    ],
)
def test_a_bad_option_value_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, args: list[str], ini: str, message: str
) -> None:
    pytester.makepyfile(eval_answer=ANSWER)
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_an_unknown_pyproject_setting_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.trialkit]\ntrails = 3\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *[[]tool.trialkit]: unknown setting trails (known: *"])


def test_a_suite_that_cannot_run_makes_its_items_errors(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(eval_answer=ANSWER)  # no harness, no model, no --trialkit-model
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*suite 'answer': nothing to evaluate*"])
