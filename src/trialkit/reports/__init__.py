"""Renderers of a `Report`: terminal, Markdown, JSON, JUnit XML and HTML.

Each name is imported on first use, so a command that needs one renderer, or only the shared
tables (`trialkit.reports._table`), does not load the others.
"""

from typing import TYPE_CHECKING

from trialkit._lazy import lazy_exports

if TYPE_CHECKING:
    from trialkit.reports.html import render_html as render_html
    from trialkit.reports.json import ReportFormatError as ReportFormatError
    from trialkit.reports.json import load_json_report as load_json_report
    from trialkit.reports.json import render_json as render_json
    from trialkit.reports.junit import render_junit as render_junit
    from trialkit.reports.markdown import render_markdown as render_markdown
    from trialkit.reports.terminal import render_terminal as render_terminal

_ORIGINS = {
    "render_html": "trialkit.reports.html",
    "ReportFormatError": "trialkit.reports.json",
    "load_json_report": "trialkit.reports.json",
    "render_json": "trialkit.reports.json",
    "render_junit": "trialkit.reports.junit",
    "render_markdown": "trialkit.reports.markdown",
    "render_terminal": "trialkit.reports.terminal",
}

__all__ = [
    "ReportFormatError",
    "load_json_report",
    "render_html",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_terminal",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _ORIGINS)
