"""An item's outcome follows its suite's gate; errors are pytest errors, fails failures."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.pytest_plugin.conftest import AGENT

MIXED = (
    AGENT
    + """

mixed = Suite(id="mixed", kind="mixed", trials=2, harness=agent, tasks=[
    Task(id="must", kind="regression", input="Spain?", graders=[graders.contains("madrid")]),
    Task(id="may", kind="capability", input="Spain?", graders=[graders.contains("madrid")]),
])
"""
)


def test_a_regression_task_that_does_not_pass_every_trial_fails(
    capitals: pytest.Pytester,
) -> None:
    result = capitals.runpytest(
        "-p", "no:cacheprovider", "-k", "capitals and not crash and not explore"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ capitals::spain _*",
            "task 'spain' of suite 'capitals': regression task: 1 of 3 trials did not pass",
            "  2/3 trials passed, pass@1 0.67, pass@3 1.00, pass^3 0.00",
            "  trial 0: pass",
            "  trial 1: fail: contains('madrid'): output does not contain 'madrid' "
            "(output: 'Barcelona')",
            "  trial 2: pass",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_capability_task_passes_and_reports_its_figures(capitals: pytest.Pytester) -> None:
    result = capitals.runpytest("-p", "no:cacheprovider", "-v", "-k", "explore")
    result.assert_outcomes(passed=2)  # even "never", none of whose trials passed
    result.stdout.fnmatch_lines(
        [
            "*= trialkit =*",
            "suite explore (capability), run *",
            "  1/2 tasks passed, pass rate 25.0% (95% CI 0.0%-100.0%) over 8 trials, pass@1 0.25, "
            "pass@4 0.50, pass^4 0.00, 0 errors, cost n/a",
            "    spain (capability): pass, 2/4 trials passed, pass@1 0.50, pass@4 1.00, "
            "pass^4 0.00",
            "    never (capability): fail, 0/4 trials passed, pass@1 0.00, pass@4 0.00, "
            "pass^4 0.00",
        ]
    )


def test_strict_capability_fails_a_capability_task_no_trial_passed(
    capitals: pytest.Pytester,
) -> None:
    result = capitals.runpytest(
        "-p", "no:cacheprovider", "-k", "explore", "--trialkit-strict-capability"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "task 'never' of suite 'explore': capability task: none of its 4 trials passed "
            "(--trialkit-strict-capability)",
        ]
    )


def test_a_mixed_suite_takes_each_tasks_kind(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(eval_mixed=MIXED)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["PASSED eval_mixed.py::mixed::may", "FAILED eval_mixed.py::mixed::must*"]
    )


def test_errored_trials_are_errors_not_failures_in_the_summary_and_junit(
    capitals: pytest.Pytester,
) -> None:
    junit = capitals.path / "junit.xml"
    result = capitals.runpytest("-p", "no:cacheprovider", f"--junitxml={junit}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*_ ERROR at setup of capitals::crash _*",
            "task 'crash' of suite 'capitals': 3 of 3 trials errored (no verdict)",
            "  trial 0: error: RuntimeError: the agent crashed",
        ]
    )
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"france", "spain", "crash", "never"} | {"spain"}
    crash = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "crash")
    assert crash.find("error") is not None
    assert crash.find("failure") is None
    assert "RuntimeError: the agent crashed" in (crash.find("error").text or "")
    failed = [
        c
        for c in ET.parse(junit).getroot().iter("testcase")
        if c.get("name") == "spain" and c.get("classname", "").endswith("capitals")
    ]
    assert failed[0].find("failure") is not None
    assert failed[0].find("error") is None
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("errors"), suite.get("failures")) == ("1", "1")


def test_junit_properties_carry_the_trial_counts_and_figures(capitals: pytest.Pytester) -> None:
    junit = capitals.path / "junit.xml"
    capitals.runpytest("-p", "no:cacheprovider", f"--junitxml={junit}", "-k", "explore")
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(junit).getroot().iter("testcase")
    }
    spain = cases["spain"]
    assert spain["trialkit_run"]
    assert {k: v for k, v in spain.items() if k != "trialkit_run"} == {
        "trialkit_kind": "capability",
        "trialkit_verdict": "pass",
        "trialkit_trials": "4",
        "trialkit_passed": "2",
        "trialkit_failed": "2",
        "trialkit_errors": "0",
        "trialkit_pass_at_1": "0.5",
        "trialkit_pass_at_2": "0.833333",
        "trialkit_pass_at_3": "1.0",
        "trialkit_pass_at_4": "1.0",
        "trialkit_pass_hat_1": "0.5",
        "trialkit_pass_hat_2": "0.166667",
        "trialkit_pass_hat_3": "0.0",
        "trialkit_pass_hat_4": "0.0",
    }
    assert cases["never"]["trialkit_run"] == spain["trialkit_run"]  # one run for the suite
    assert cases["never"]["trialkit_verdict"] == "fail"
