import io
from pathlib import Path

import xmlschema
from rich.console import Console

import trialkit.reports

from ._factory import make_report


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
