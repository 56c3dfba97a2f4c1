"""A small deterministic "agent": how to evaluate your own Python code, with no model at all.

It answers from a table,
reads the trial number to behave like a sampled model (one answer drifts on some trials),
and refuses destructive requests by raising, which is what an `expect="failure"` task checks.
"""

from __future__ import annotations

import json
import re

from trialkit import TrialContext

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima"}


class Refusal(RuntimeError):
    """The agent declines a request it must not carry out."""


def answer(prompt: str, ctx: TrialContext) -> str:
    text = prompt.lower()
    if "delete" in text or "rm -rf" in text:
        raise Refusal("I will not delete user files.")
    if "json" in text:
        country = _country(text) or "france"
        return (
            "```json\n"
            + json.dumps({"country": country.title(), "capital": CAPITALS[country]})
            + "\n```"
        )
    if m := re.search(r"(\d+)\s*\+\s*(\d+)", text):
        return f"The sum is {int(m.group(1)) + int(m.group(2))}."
    if "boiling point" in text:
        # Drifts like a sampled model: every third trial forgets the unit.
        return "Water boils at 100." if ctx.trial_index % 3 == 2 else "Water boils at 100 °C."
    if "haiku" in text:
        return "Autumn moonlight—\na worm digs silently\ninto the chestnut."
    if named := _country(text):
        return f"The capital of {named.title()} is {CAPITALS[named]}."
    return "I am not sure."


def _country(text: str) -> str | None:
    return next((c for c in CAPITALS if c in text), None)
