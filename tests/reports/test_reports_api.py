import io
from collections.abc import Callable
from pathlib import Path

import pytest
import xmlschema
from rich.console import Console

import trialkit.reports
from trialkit.report import Report
from trialkit.reports.json import load_json_report, render_json

from ._factory import capability_report, judged_report, make_report, nasty_report


def test_exported_names() -> None:
    assert sorted(trialkit.reports.__all__) == [
        "ReportFormatError",
        "load_json_report",
        "render_html",
        "render_json",
        "render_junit",
        "render_markdown",
        "render_terminal",
    ]
    for name in trialkit.reports.__all__:
        assert hasattr(trialkit.reports, name)


def test_an_empty_report_renders_everywhere() -> None:
    report = make_report({})
    schema = xmlschema.XMLSchema(str(Path(__file__).parent.parent / "data" / "junit-10.xsd"))

    schema.validate(report.to_junit())
    assert "| Tasks | 0: ✅ 0 passed, ❌ 0 failed, ⚠️ 0 errored |" in report.to_markdown()
    assert trialkit.reports.load_json_report(report.to_json()) == report
    trialkit.reports.render_terminal(report, Console(file=io.StringIO(), width=100))
    assert trialkit.reports.render_html(report) == report.to_html()
    assert '<tr><th scope="row">Tasks</th><td>0: ' in report.to_html()


@pytest.mark.parametrize("made", [capability_report, judged_report, nasty_report])
def test_the_report_methods_are_the_renderers(made: Callable[[], Report]) -> None:
    """`report.to_markdown()` and its siblings (kept for users; they import the renderers one
    way) give the text of the `trialkit.reports` functions, every option passed on."""
    report = made()
    reports = trialkit.reports
    assert report.to_markdown() == reports.render_markdown(report)
    assert report.to_html() == reports.render_html(report)
    for indent in (2, None, 4):
        assert report.to_json(indent=indent) == reports.render_json(report, indent=indent)
    assert report.to_json() == render_json(report)  # the module the format is read back in
    for failures in ("failure", "skipped", "passed"):
        for locations in ("text", "attributes"):
            assert report.to_junit(
                capability_failures=failures, locations=locations
            ) == reports.render_junit(report, capability_failures=failures, locations=locations)
    assert load_json_report(report.to_json(indent=None)) == report
