"""Renderers of a `Report`: terminal, Markdown, JSON, JUnit XML and HTML."""

from trialkit.reports.html import render_html
from trialkit.reports.json import ReportFormatError, load_json_report, render_json
from trialkit.reports.junit import render_junit
from trialkit.reports.markdown import render_markdown
from trialkit.reports.terminal import render_terminal

__all__ = [
    "ReportFormatError",
    "load_json_report",
    "render_html",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_terminal",
]
