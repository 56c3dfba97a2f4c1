"""The JSON report: the documented, versioned format other tools read (DESIGN.md §6).

It is the whole `Report` tree as pydantic serialises it, so the format and the model cannot
drift apart; `schema_version` comes first so a reader can decide how to parse before reading on.

`write_json_report` writes a stored run's report as it reads it from the store, a task at a
time (`trialkit.store.report_stream`), the same text `render_json` makes of the whole report,
so a report of any size is written in constant memory.

The text is made by `trialkit.reports._json_render` (which `Report.to_json` uses too);
`render_json` and `encode` are importable from here, where the format is read back.
"""

from __future__ import annotations

import json
from typing import IO, TYPE_CHECKING

from pydantic import ValidationError

from trialkit.report import REPORT_SCHEMA_VERSION, Report
from trialkit.reports._json_render import DERIVED, encode, render_json, write_parts
from trialkit.secrets import held

if TYPE_CHECKING:
    from trialkit.store import Store

__all__ = [
    "DERIVED",
    "ReportFormatError",
    "encode",
    "load_json_report",
    "render_json",
    "write_json_report",
]


class ReportFormatError(ValueError):
    """The text is not a trialkit JSON report this version can read."""


def write_json_report(store: Store, run_id: str, out: IO[str]) -> None:
    """Write the JSON report of stored run `run_id` to `out` as it is read from the store,
    a task at a time: the text `render_json(store.load_report(run_id))` is, with every secret
    redacted, never the whole report in memory. `out` is a file that can be rewound: when a
    trial the run's kept report lists turns out to be unreadable as it is read, the report
    is written again, computed from the trials (as `Store.load_report` does)."""
    from trialkit.store.report_stream import KeptReportStale, open_report

    start = out.tell()
    with held():  # secrets looked up once for the thousands of pieces redacted here
        try:
            with open_report(store, run_id) as parts:
                write_parts(parts.head, parts.gate_report, parts.tasks(), out)
        except KeptReportStale:
            out.seek(start)
            out.truncate()
            with open_report(store, run_id, computed=True) as parts:
                write_parts(parts.head, parts.gate_report, parts.tasks(), out)


def load_json_report(text: str | bytes) -> Report:
    """Read a JSON report back, refusing a newer `schema_version` instead of misreading it.

    When the format changes, the upgrade from each older version is a plain function here,
    applied before validation, never logic inside the model's validators.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFormatError(f"not a JSON report: {exc}") from None
    if not isinstance(data, dict):
        raise ReportFormatError(f"not a JSON report: expected an object, got {type(data).__name__}")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ReportFormatError(
            f"not a trialkit report: schema_version must be a whole number >= 1, got {version!r}"
        )
    if version > REPORT_SCHEMA_VERSION:
        raise ReportFormatError(
            f"this report has schema_version {version}, newer than the {REPORT_SCHEMA_VERSION} "
            "this trialkit reads; upgrade trialkit to read it"
        )
    for key in DERIVED:
        data.pop(key, None)
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        raise ReportFormatError(f"invalid trialkit report: {exc}") from None
