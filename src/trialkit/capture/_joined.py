"""Streamed answers with a trial's own values split across their deltas, joined for recording.

A model streams a tool call's arguments and its text in small deltas: Claude Code's
`Write {"file_path": "/tmp/trial-3/hello.txt"}` may arrive as `{"file_pa`, `th": "/tmp/tri`,
`al-3/hello.txt"}`. A recording writes each per-trial value (the workspace path...) as its
placeholder, so that a replay in another folder gets its own path back; a value split across
deltas is in no one event to replace. So before recording, each run of deltas of one part of
the answer (an Anthropic content block's text, JSON or thinking; a Responses item's text,
arguments or custom tool input; a Chat Completions choice's content or a tool call's
arguments) whose joined text holds such a value becomes one delta, in the run's first event.
A client reads the same answer from it; a stream with no such value is recorded untouched.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trialkit.capture.wire import Api


def join_split_values(api: Api, events: list[str], values: Sequence[str]) -> list[str]:
    """`events` (recorded event texts) with the runs of deltas that hold one of `values` only
    when joined, joined; the same list when there are none."""
    wanted = [v for v in values if v] + [_escaped(v) for v in values if v and _escaped(v) != v]
    if not wanted:
        return events
    parsed: list[tuple[str | None, Any]] = [_parse(event) for event in events]
    groups: dict[tuple[Any, ...], list[tuple[int, list[Any]]]] = {}
    for position, (_, data) in enumerate(parsed):
        for key, path in _deltas(api, data):
            groups.setdefault(key, []).append((position, path))
    dropped: set[int] = set()
    changed: set[int] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        pieces = [_get(parsed[position][1], path) for position, path in members]
        joined = "".join(pieces)
        if not any(_split(value, joined, pieces) for value in wanted):
            continue  # each value it holds is whole in one delta: placeholders replace it there
        first, first_path = members[0]
        _set(parsed[first][1], first_path, joined)
        changed.add(first)
        for position, path in members[1:]:
            if _only_delta(api, parsed[position][1]):
                dropped.add(position)
            else:  # the event carries more than this delta: keep it, without the text
                _set(parsed[position][1], path, "")
                changed.add(position)
    if not changed:
        return events
    out: list[str] = []
    renumber = api == "responses"
    for position, event in enumerate(events):
        if position in dropped:
            continue
        name, data = parsed[position]
        if renumber and isinstance(data, dict) and isinstance(data.get("sequence_number"), int):
            data["sequence_number"] = len(out)
            out.append(_render(name, data))
        elif position in changed:
            out.append(_render(name, data))
        else:
            out.append(event)
    return out


def _split(value: str, joined: str, pieces: list[str]) -> bool:
    """Whether `value` occurs in the joined text more often than in the pieces one by one."""
    return joined.count(value) > sum(piece.count(value) for piece in pieces)


def _escaped(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _parse(event: str) -> tuple[str | None, Any]:
    name: str | None = None
    data: list[str] = []
    for line in event.splitlines():
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    try:
        return name, json.loads("\n".join(data))
    except ValueError:
        return name, None


def _render(name: str | None, data: Any) -> str:
    head = f"event: {name}\n" if name is not None else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _deltas(api: Api, data: Any) -> list[tuple[tuple[Any, ...], list[Any]]]:
    """(the part of the answer it adds to, where its text is) for each delta in an event."""
    if not isinstance(data, dict):
        return []
    kind = data.get("type")
    if api == "messages":
        delta = data.get("delta")
        if kind != "content_block_delta" or not isinstance(delta, dict):
            return []
        for text_field in ("text", "partial_json", "thinking"):
            if isinstance(delta.get(text_field), str):
                return [(("block", data.get("index"), text_field), ["delta", text_field])]
        return []
    if api == "responses":
        if not (isinstance(kind, str) and kind.endswith(".delta")):
            return []
        if not isinstance(data.get("delta"), str):
            return []
        part = tuple(data.get(k) for k in ("item_id", "output_index", "content_index"))
        return [((kind, *part, data.get("summary_index")), ["delta"])]
    if api == "chat":
        found: list[tuple[tuple[Any, ...], list[Any]]] = []
        for c, choice in enumerate(data.get("choices") or ()):
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            index = choice.get("index", c)
            if isinstance(delta.get("content"), str):
                found.append((("content", index), ["choices", c, "delta", "content"]))
            for t, call in enumerate(delta.get("tool_calls") or ()):
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    path = ["choices", c, "delta", "tool_calls", t, "function", "arguments"]
                    found.append((("call", index, call.get("index", t)), path))
        return found
    return []


def _only_delta(api: Api, data: Any) -> bool:
    """Whether the event is nothing but its one delta (it can go once that is elsewhere)."""
    if api != "chat":
        return True
    choices: list[Any] = data.get("choices") or []
    if len(choices) != 1 or data.get("usage"):
        return False
    choice = choices[0]
    delta = choice.get("delta") or {}
    if choice.get("finish_reason") is not None:
        return False
    if set(delta) - {"content", "tool_calls", "role"} or delta.get("role"):
        return False
    calls = delta.get("tool_calls") or ()
    if "content" in delta and calls:
        return False
    for call in calls:
        if call.get("id") or (call.get("function") or {}).get("name"):
            return False
    return len(calls) <= 1


def _get(data: Any, path: list[Any]) -> str:
    for step in path:
        data = data[step]
    return str(data)


def _set(data: Any, path: list[Any], value: str) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value
