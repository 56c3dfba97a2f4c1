"""A scripted stand-in for a real model, so the example runs offline, free and the same way
every time. It plays the part a tool-calling model would, step by step, from what it has seen.

It is a decent notes agent with one habit to catch: on odd-numbered trials it forgets to link a
note from anywhere but the index — which the capability task asks for.
"""

from __future__ import annotations

import re

from trialkit.models import ModelRequest, ScriptedModel
from trialkit.transcript import ToolCall

AREAS = ("Health", "Work", "Home")
_KEYWORDS = {
    "Health": ("slept", "sleep", "run", "doctor", "tired"),
    "Work": ("report", "meeting", "review", "project"),
    "Home": ("garden", "boiler", "kitchen", "repair"),
}


def _step(request: ModelRequest, trial: int) -> str | ToolCall:
    said = [m.content for m in request.messages if m.role == "user"]
    entry, latest = said[0], said[-1]
    done = [m.name for m in request.messages if m.role == "tool"]
    results = [m.content for m in request.messages if m.role == "tool"]

    def call(name: str, **arguments: str) -> ToolCall:
        return ToolCall(id=f"call_{len(done) + 1}", name=name, arguments=arguments)

    if not done:
        return call("read_index")
    if done[-1] == "give_up":
        return "I could not file this entry."
    asked_area = re.search(r"under (?:the )?(\w+)(?: area)?", entry)
    area = asked_area.group(1) if asked_area else _guess_area(entry)
    if area not in AREAS:
        return call("give_up", reason=f"there is no {area} area in the index")
    if "not yet" in latest.lower():
        return f"I would file it under {area}."
    date = re.search(r"\d{4}-\d{2}-\d{2}", entry)
    titled = re.search(r"titled '([^']+)'", latest) or re.search(r"titled '([^']+)'", entry)
    title = titled.group(1) if titled else "Entry"
    path = f"Areas/{area}/{date.group(0) if date else 'undated'} {title}.md"
    if "write_note" not in done:
        body = entry.split(":", 1)[1].split(".", 1)[0].strip() if ":" in entry else entry
        return call("write_note", path=path, text=f"# {title}\n\n{body}.")
    links = [r for n, r in zip(done, results, strict=True) if n == "link_note"]
    if not links:
        return call("link_note", path=path)
    also = re.search(r"also from (\S+\.md)", entry)
    if also and len(links) == 1 and trial % 2 == 0:
        return call("link_note", path=path, into=also.group(1))
    return f"Filed the entry as {path} and linked it."


def _guess_area(entry: str) -> str:
    words = entry.lower()
    scores = {area: sum(k in words for k in keys) for area, keys in _KEYWORDS.items()}
    return max(scores, key=lambda area: scores[area])


model = ScriptedModel("notes-agent", _step)
