"""The JSON text of a `Report`: the whole tree as pydantic serialises it, with the gate's
verdict and how the model calls were made, written as `json.dumps(indent=2)` would.

`trialkit.reports.json` is the public module of the format (`render_json`, and reading a
report back); the text is made here, where nothing needs `Report` but its type, so
`Report.to_json` can import it without an import cycle.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from json.encoder import encode_basestring
from typing import IO, TYPE_CHECKING, Any

from trialkit.consistency import summary_fields as consistency_fields
from trialkit.reports._gate import calls_json, gate_json
from trialkit.run.retries import summary_fields as retry_fields
from trialkit.secrets import redact

if TYPE_CHECKING:
    from trialkit.report import Report

_SURROGATE = re.compile("[\ud800-\udfff]")


def render_json(report: Report, *, indent: int | None = 2) -> str:
    """The report as JSON; a rate with no data is `null`, never 0.

    The text is always valid JSON that any UTF-8 writer accepts: a non-finite float (which
    `json` would write as the non-standard `NaN`) becomes `null`, and a lone surrogate in user
    content (which pydantic and UTF-8 refuse) is written as its `\\uXXXX` escape, which reads
    back unchanged.
    """
    data = _with_verdict(report.model_dump(mode="json"), report)
    if indent == 2:
        text = encode(data, finite=True)
    else:
        text = json.dumps(_finite(data), indent=indent, ensure_ascii=False, allow_nan=False)
    return _escape_surrogates(text) + "\n"


def write_parts(
    head: dict[str, Any], gate_report: Report, tasks: Iterable[dict[str, Any]], out: IO[str]
) -> None:
    """The report `render_json` makes, from its parts: its head and gate, then each task."""
    shown = {
        "schema_version": head["schema_version"],
        "run": head["run"],
        "suite": head["suite"],
        "gate": gate_json(gate_report.gate()),
        "model_calls": calls_json(gate_report),
        "summary": _summary(head["summary"], head["run"]["config"]),
    }
    members = [f"{encode_basestring(k)}: {encode(v, _ITEM, finite=True)}" for k, v in shown.items()]
    out.write(_piece("{\n" + _ITEM + f",\n{_ITEM}".join(members) + f',\n{_ITEM}"tasks": '))
    first = True
    for task in tasks:
        out.write("[\n" if first else ",\n")
        out.write(_piece(_TASK + encode(task, _TASK, finite=True)))
        first = False
    out.write("[]\n}\n" if first else f"\n{_ITEM}]\n}}\n")


_ITEM = "  "
"""The indent of the report's members."""
_TASK = "    "
"""The indent of a task in the report's `tasks`."""


def _piece(text: str) -> str:
    """A whole part of the report as written: no secret (a secret is never cut in two, since
    a part is whole JSON values), lone surrogates escaped."""
    return _escape_surrogates(redact(text))


def _escape_surrogates(text: str) -> str:
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode(value: Any, indent: str = "", *, finite: bool = False) -> str:
    """`value` (JSON data: dicts, lists, strings, numbers, booleans, None) as
    `json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)` writes it, placed at
    `indent` (its inner lines indented from there), about twice as fast (no generators).
    `finite`: a NaN or infinite number is written `null` instead of refused."""
    out: list[str] = []
    _encode(value, indent, out, "null" if finite else None)
    return "".join(out)


def _encode(value: Any, indent: str, out: list[str], not_finite: str | None) -> None:
    kind = type(value)
    if kind is dict:
        if not value:
            out.append("{}")
            return
        inner = indent + "  "
        between = ",\n" + inner
        out.append("{\n" + inner)
        first = True
        for key, item in value.items():
            if first:
                first = False
            else:
                out.append(between)
            out.append(encode_basestring(key if type(key) is str else _key(key)) + ": ")
            _item(item, inner, out, not_finite)
        out.append("\n" + indent + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = indent + "  "
        between = ",\n" + inner
        out.append("[\n" + inner)
        first = True
        for item in value:
            if first:
                first = False
            else:
                out.append(between)
            _item(item, inner, out, not_finite)
        out.append("\n" + indent + "]")
    else:
        _other(value, indent, out, not_finite)


def _item(item: Any, indent: str, out: list[str], not_finite: str | None) -> None:
    """One value inside a container, the usual kinds first (a call saved per value)."""
    kind = type(item)
    if kind is str:
        out.append(encode_basestring(item))
    elif kind is int:
        out.append(int.__repr__(item))
    elif item is None:
        out.append("null")
    elif item is True:
        out.append("true")
    elif item is False:
        out.append("false")
    elif kind is float and item - item == 0.0:  # finite (inf - inf and nan - nan are nan)
        out.append(float.__repr__(item))
    elif kind is dict or kind is list:
        _encode(item, indent, out, not_finite)
    else:
        _other(item, indent, out, not_finite)


def _other(value: Any, indent: str, out: list[str], not_finite: str | None) -> None:
    """Scalars, and subclasses of the JSON types (a str enum, a dict subclass)."""
    if isinstance(value, str):
        out.append(encode_basestring(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if math.isfinite(value):
            out.append(float.__repr__(value))
        elif not_finite is not None:
            out.append(not_finite)
        else:
            raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    elif isinstance(value, dict | list | tuple):
        _encode(dict(value) if isinstance(value, dict) else list(value), indent, out, not_finite)
    else:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _key(key: Any) -> str:
    """A key as `json.dumps` writes it: strings as they are, numbers and booleans as text."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        out: list[str] = []
        _other(key, "", out, None)
        return out[0]
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


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
    if "summary" in shown:
        shown["summary"] = _summary(shown["summary"], report.run.config)
    return shown


def _summary(summary: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The summary with the retried trials and the repeated judges' consistency, if any."""
    return {**summary, **retry_fields(config), **consistency_fields(config)}


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
