import json

import pytest

from trialkit.report import Report
from trialkit.reports import ReportFormatError, load_json_report, render_json
from trialkit.score import Verdict

from ._factory import capability_report, judged_report, make_report, result


def test_round_trip() -> None:
    report = capability_report()

    assert load_json_report(render_json(report)) == report


def test_schema_version_comes_first_and_the_documented_keys_are_there() -> None:
    data = json.loads(render_json(capability_report()))

    assert next(iter(data)) == "schema_version"
    assert data["schema_version"] == 1
    assert {"id", "name", "started_at", "finished_at"} <= data["run"].keys()
    assert data["suite"] == {"id": "capitals", "kind": "capability", "description": None}
    assert {
        "tasks",
        "trials",
        "passed_tasks",
        "failed_tasks",
        "error_tasks",
        "pass_rate",
        "pass_rate_ci",
        "pass_at_k",
        "pass_hat_k",
        "flakiness_rate",
        "errors",
        "usage",
        "grader_usage",
        "cost_usd",
        "grader_cost_usd",
    } <= data["summary"].keys()
    germany = data["tasks"][1]
    assert germany["id"] == "germany"
    assert (germany["trials"], germany["passed"], germany["failed"], germany["errors"]) == (
        3,
        2,
        1,
        0,
    )
    assert set(germany["pass_at_k"]) == {"1", "2", "3"}
    assert germany["results"][1]["verdict"] == "fail"
    assert germany["results"][1]["output"] == "Bonn"
    assert germany["results"][1]["scores"][0]["name"] == "contains('berlin')"


def test_rates_with_no_data_are_null() -> None:
    report = make_report(
        {"crashed": [result(0, Verdict.ERROR, scores=[], output=None, cost_usd=None)]}
    )

    summary = json.loads(render_json(report))["summary"]

    for key in ("pass_rate", "pass_rate_ci", "flakiness_rate", "mean_score", "cost_usd"):
        assert summary[key] is None, key
    assert summary["pass_at_k"] == {}


def test_compact() -> None:
    text = render_json(capability_report(), indent=None)

    assert text.count("\n") == 1
    assert text.startswith('{"schema_version": 1,')


def test_awkward_text_stays_valid_and_round_trips() -> None:
    output = "nul\x00 esc\x1b[31m surrogate\ud800 nonchar\ufffe emoji😀"
    report = make_report({"weird": [result(0, Verdict.FAIL, output=output)]})

    text = render_json(report)

    text.encode("utf-8")
    assert load_json_report(text) == report


def test_non_finite_numbers_become_null() -> None:
    report = capability_report()
    report.tasks[0].mean_score = float("nan")

    data = json.loads(render_json(report))

    assert data["tasks"][0]["mean_score"] is None


def test_a_newer_schema_version_is_refused() -> None:
    data = json.loads(render_json(capability_report()))
    data["schema_version"] = 2

    with pytest.raises(ReportFormatError, match="schema_version 2, newer than the 1"):
        load_json_report(json.dumps(data))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not a JSON report"),
        ("[]", "expected an object, got list"),
        ('{"run": {}}', "schema_version must be a whole number >= 1, got None"),
        ('{"schema_version": "1"}', "got '1'"),
        ('{"schema_version": 1, "run": {}}', "invalid trialkit report"),
    ],
)
def test_what_is_not_a_report_is_refused(text: str, message: str) -> None:
    with pytest.raises(ReportFormatError, match=message):
        load_json_report(text)


def test_report_methods_use_the_renderers() -> None:
    report: Report = capability_report()

    assert report.to_json() == render_json(report)


def test_grader_usage_and_cost_are_written_and_read_back() -> None:
    report = judged_report()

    data = json.loads(render_json(report))

    assert data["run"]["status"] == "stopped"
    assert data["run"]["config"]["model"] == "openai/gpt-4o-mini"
    assert data["summary"]["grader_usage"]["input_tokens"] == 120
    assert data["summary"]["grader_cost_usd"] == pytest.approx(0.0024)
    assert data["summary"]["cost_usd"] == pytest.approx(0.0054)
    france = data["tasks"][0]
    assert france["grader_usage"]["output_tokens"] == 20
    assert france["grader_cost_usd"] == pytest.approx(0.0016)
    assert france["results"][0]["grader_usage"]["input_tokens"] == 40
    assert france["results"][0]["grader_cost_usd"] == 0.0008
    assert load_json_report(render_json(report)) == report


def test_a_report_written_before_grader_fields_existed_still_loads() -> None:
    data = json.loads(render_json(capability_report()))
    for part in [
        data["summary"],
        *data["tasks"],
        *(r for t in data["tasks"] for r in t["results"]),
    ]:
        del part["grader_usage"], part["grader_cost_usd"]

    report = load_json_report(json.dumps(data))

    assert report == capability_report()
    assert report.summary.grader_usage.is_empty()
    assert report.summary.grader_cost_usd is None
    assert report.tasks[0].results[0].grader_cost_usd is None
