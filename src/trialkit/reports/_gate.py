"""What every report format says of the CI gate and of how the model calls were made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialkit.report import Gate, Report

CALLS = {
    "live": "live: every model call went to the model (no cassette)",
    "record": "recorded: every model call went to the model and was stored in the cassette",
    "replay": "replayed: every model call was answered from the cassette, none reached a model",
    "auto": "replayed where the cassette held an answer, the rest called live and recorded",
}


def gate_headline(gate: Gate) -> str:
    """`gate passed (exit 0)` or `gate failed (exit 3)`: the verdict CI acts on."""
    return f"gate {gate.verdict} (exit {gate.exit_code})"


def gate_text(gate: Gate) -> str:
    """The headline with every reason: `gate failed (exit 3): 2 of 9 trials errored ...; ...`."""
    if not gate.reasons:
        return gate_headline(gate)
    return f"{gate_headline(gate)}: {'; '.join(gate.reasons)}"


def calls_text(report: Report) -> str:
    """How the run's model calls were made, and with which cassette folder."""
    mode = report.cache_mode
    said = CALLS.get(mode, mode)
    folder = report.cache_folder
    return said if folder is None else f"{said} ({folder})"


def gate_json(gate: Gate) -> dict[str, Any]:
    return {
        "verdict": gate.verdict,
        "exit_code": gate.exit_code,
        "reasons": list(gate.reasons),
        "min_pass_rate": gate.min_pass_rate,
        "fail_on_error": gate.fail_on_error,
    }


def calls_json(report: Report) -> dict[str, Any]:
    return {"mode": report.cache_mode, "cassette": report.cache_folder}
