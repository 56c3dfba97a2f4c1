"""The agent under test: answers capital questions from a table, refuses to delete files."""

from __future__ import annotations

import json

from trialkit import Message

CAPITALS = {
    "france": "Paris",
    "japan": "Tokyo",
    "kenya": "Nairobi",
    "peru": "Lima",
    "chile": "Santiago",
    "norway": "Oslo",
    "ghana": "Accra",
}


class Refusal(RuntimeError):
    """The agent declines a request it must not carry out."""


def answer(prompt: str | list[Message]) -> str:
    """One turn: a question as text, or chat messages (the last user message is the question)."""
    if isinstance(prompt, str):
        text = prompt
    else:
        text = [m.content for m in prompt if m.role == "user"][-1]
    lowered = text.lower()
    if "delete" in lowered:
        raise Refusal("I will not delete user files.")
    country = next((c for c in CAPITALS if c in lowered), None)
    if country is None:
        return "I am not sure."
    if "json" in lowered:
        return json.dumps({"country": country.title(), "capital": CAPITALS[country]})
    return f"The capital of {country.title()} is {CAPITALS[country]}."
