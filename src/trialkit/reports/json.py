"""The JSON report: the documented, versioned format other tools read (DESIGN.md §6).

It is the whole `Report` tree as pydantic serialises it, so the format and the model cannot
drift apart; `schema_version` comes first so a reader can decide how to parse before reading on.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import ValidationError

from trialkit.report import REPORT_SCHEMA_VERSION, Report
from trialkit.reports._gate import calls_json, gate_json


class ReportFormatError(ValueError):
    """The text is not a trialkit JSON report this version can read."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def render_json(report: Report, *, indent: int | None = 2) -> str:
    """The report as JSON; a rate with no data is `null`, never 0.

    The text is always valid JSON that any UTF-8 writer accepts: a non-finite float (which
    `json` would write as the non-standard `NaN`) becomes `null`, and a lone surrogate in user
    content (which pydantic and UTF-8 refuse) is written as its `\\uXXXX` escape, which reads
    back unchanged.
    """
    data = _finite(report.model_dump(mode="json"))
    data = _with_verdict(data, report)
    text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


DERIVED = ("gate", "model_calls")
"""Keys the JSON report adds to the `Report` tree: computed from it, so dropped on reading."""


def _with_verdict(data: dict[str, Any], report: Report) -> dict[str, Any]:
    """`data` with the gate's verdict and how the model calls were made, after `suite`."""
    shown: dict[str, Any] = {}
    for key, value in data.items():
        shown[key] = value
        if key == "suite":
            shown["gate"] = gate_json(report.gate())
            shown["model_calls"] = calls_json(report)
    return shown


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


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
