"""`trialkit run --baseline FILE|RUN`: the run just made, against a baseline, for CI.

The baseline is a JSON report file (the artifact a run on the base branch wrote with `--json`,
so the two runs need not share a store) or a stored run. It is read before any trial runs, so
a baseline that cannot be used is exit 2 with nothing run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.cli._common import fail

if TYPE_CHECKING:
    from trialkit.analysis.compare import Comparison
    from trialkit.report import Report
    from trialkit.store import Store
    from trialkit.task import Suite


def load_baseline(ref: str, store: Store, suite: Suite, need_interval: bool) -> Report:
    """The baseline's report (per-task figures only), checked to be of `suite`.
    (`need_interval` is kept for callers: the gate's test is pure Python and needs no extra.)"""
    del need_interval
    report = read_report_file(ref) if _is_file(ref) else _stored(ref, store)
    if report.suite.id != suite.id:
        fail(
            f"--baseline {ref}: a run of suite {report.suite.id!r}, not {suite.id!r}: "
            "compare runs of the same suite"
        )
    return report


def read_report_file(path: str) -> Report:
    """A JSON report file, or exit 2 naming the file and what is wrong with it."""
    from trialkit.reports.json import ReportFormatError, load_json_report

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        fail(f"{path}: cannot read the report: {exc.strerror or exc}")
    try:
        return load_json_report(data)
    except ReportFormatError as exc:
        fail(f"{path}: {exc}")


def _is_file(ref: str) -> bool:
    path = Path(ref)
    if path.is_file():
        return True
    if ref.endswith(".json"):  # meant as a file: never looked up as a run name
        fail(f"--baseline {ref}: no such report file")
    return False


def _stored(ref: str, store: Store) -> Report:
    try:
        run_id = store.resolve_run(ref)
    except LookupError as exc:
        fail(f"--baseline {ref}: {str(exc).strip(chr(39) + chr(34))} (nor a report file)")
    return store.load_report(run_id, max_results=0)


def compare_with(baseline: Report, report: Report) -> Comparison:
    """The comparison of `report` (B) with `baseline` (A), on their per-task figures."""
    from trialkit.analysis.compare import compare_reports

    return compare_reports([baseline, report])


def print_comparison(comparison: Comparison, console: Any, *, quiet: bool) -> bool:
    """Print the comparison of this run (B) with the baseline (A): its table and conclusion,
    only the conclusion when `quiet`; whether this run is significantly worse."""
    from rich.text import Text

    from trialkit.analysis.compare import conclusion
    from trialkit.reports._table import print_line
    from trialkit.reports.compare import render_compare_terminal

    pair = comparison.pairs[0]
    if quiet:
        print_line(console, Text(conclusion(pair)))
    else:
        render_compare_terminal(comparison, console)
    print_line(console, Text(f"A is the baseline {comparison.runs[0].id}; B is this run."))
    return pair.outcome == "worse"
