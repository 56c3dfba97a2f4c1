from pathlib import Path
from typing import Any

import pytest
import xmlschema
from junitparser import Error, Failure, JUnitXml, Skipped

from trialkit.reports import render_junit
from trialkit.score import Verdict
from trialkit.task import SuiteKind

from ._factory import capability_report, judged_report, make_report, nasty_report, result

SCHEMA_PATH = Path(__file__).parent.parent / "data" / "junit-10.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMA_PATH))


def parse(text: str) -> JUnitXml:
    return JUnitXml.fromstring(text.encode("utf-8"))


def cases(xml: JUnitXml) -> dict[str, Any]:
    return {case.name: case for suite in xml for case in suite}


def test_capability_report_is_valid_and_keeps_fail_and_error_apart(
    schema: xmlschema.XMLSchema, tmp_path: Path
) -> None:
    report = capability_report()
    text = render_junit(report, capability_failures="failure")
    schema.validate(text)
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")

    xml = JUnitXml.fromfile(str(path))
    (suite,) = list(xml)

    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == (
        "capitals",
        6,
        1,
        1,
        1,
    )
    by_name = {case.name: case for case in suite}
    assert list(by_name) == ["france", "germany", "landmarks", "slow", "refuse-rm", "ambiguous"]
    assert by_name["france"].is_passed
    assert by_name["refuse-rm"].is_passed
    assert by_name["germany"].is_passed
    assert by_name["france"].classname == "capitals"
    # The trials ran side by side: testcases share the suite's wall time by their trials' time
    assert sum(case.time for case in suite) == pytest.approx(suite.time, abs=0.005)
    work = {t.id: sum(r.duration_s for r in t.results) for t in report.tasks}
    share = 6.0 / sum(work.values())
    assert by_name["landmarks"].time == pytest.approx(suite.time * share, abs=0.0005)
    (failure,) = by_name["landmarks"].result
    assert isinstance(failure, Failure)
    assert failure.message.startswith("0/3 trials passed (3 failed); trial #0: contains('paris')")
    assert "fail case-insensitive match" in failure.text
    assert "The Eiffel Tower is in Lyon." in failure.text
    (error,) = by_name["slow"].result
    assert isinstance(error, Error)
    assert error.type == "TimeoutError"
    assert "TimeoutError: the trial took longer than 60 s" in error.message
    (skipped,) = by_name["ambiguous"].result
    assert isinstance(skipped, Skipped)
    assert skipped.message.startswith("0/1 trials passed (1 unknown)")


def test_a_passing_task_with_failed_trials_reports_them_as_flaky() -> None:
    text = render_junit(capability_report())

    assert '<flakyFailure message="2/3 trials passed (1 failed), flaky; trial #1:' in text


def test_disagreeing_trials_say_how_many_passed(schema: xmlschema.XMLSchema) -> None:
    trials = [result(0, Verdict.PASS), result(1, Verdict.FAIL), result(2, Verdict.PASS)]
    report = make_report({"flaky": trials}, kind=SuiteKind.REGRESSION)
    text = render_junit(report)
    schema.validate(text)

    (failure,) = cases(parse(text))["flaky"].result

    assert failure.message.startswith("2/3 trials passed (1 failed)")


def test_identical_failures_are_listed_once() -> None:
    text = render_junit(capability_report())

    assert "trials #0, #1, #2: fail (2.00 s)" in text
    assert text.count("The Eiffel Tower is in Lyon.") == 1


def test_times_have_three_decimals(schema: xmlschema.XMLSchema) -> None:
    trials = [result(0, Verdict.PASS, duration_s=1.23456789)]
    other = [result(0, Verdict.PASS, duration_s=2.0)]
    text = render_junit(make_report({"t": trials, "u": other}))
    schema.validate(text)

    assert 'time="42.000"' in text  # the run's wall time
    assert f'name="t" time="{42 * 1.23456789 / 3.23456789:.3f}"' in text


def test_testcase_times_add_up_to_the_suite_time_when_trials_overlap(
    schema: xmlschema.XMLSchema,
) -> None:
    """Ten 2 s trials that ran at once in a 2.5 s run: not 20 s of testcases."""
    tasks = {f"t{i}": [result(0, Verdict.PASS, duration_s=2.0)] for i in range(10)}
    report = make_report(tasks)
    report.summary.duration_s = 2.5
    root = parse(render_junit(report))
    (suite,) = list(root)
    assert suite.time == pytest.approx(2.5)
    assert [case.time for case in suite] == [pytest.approx(0.25)] * 10


def test_a_task_with_no_trials_is_an_error(schema: xmlschema.XMLSchema) -> None:
    text = render_junit(make_report({"empty": []}))
    schema.validate(text)

    (error,) = cases(parse(text))["empty"].result

    assert isinstance(error, Error)
    assert error.message == "0/0 trials passed"


def test_forbidden_characters_are_sanitised(schema: xmlschema.XMLSchema) -> None:
    text = render_junit(nasty_report())
    schema.validate(text)
    text.encode("utf-8")

    xml = parse(text)

    (suite,) = list(xml)
    assert suite.name.startswith("suite")
    names = [case.name for case in suite]
    assert names[0].startswith("tasknul\\x00 esc\\x1b[31mred\\x1b[0m vt\\x0b ff\\x0c")
    assert "nonchar\\ufffe\\uffff lone\\ud800" in names[0]
    (failure,) = next(iter(suite)).result
    assert "lone\\ud800" in failure.text


def test_model_cost_and_tokens_are_suite_properties(schema: xmlschema.XMLSchema) -> None:
    text = render_junit(judged_report())
    schema.validate(text)
    suite = next(iter(parse(text)))
    props = {p.name: p.value for p in suite.properties()}
    assert props["trialkit.model"] == "openai/gpt-4o-mini"
    assert float(props["trialkit.cost_usd"]) > float(props["trialkit.grader_cost_usd"]) > 0
    assert int(props["trialkit.tokens"]) > 0
