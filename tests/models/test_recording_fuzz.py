"""Fuzzing the reader of captured-call recordings: every field of a recording file missing, of
each wrong type, or joined by an extra one, then random edits. A replay lookup gives an answer
fit to replay, no answer, or a one-line `CassetteError` naming the file; `cache verify` names the
file on every line and flags whatever a replay refuses; `cache stats` counts; nothing else is
ever raised."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trialkit.models.base import key_of
from trialkit.models.cassette import CacheMode, Cassette, CassetteError
from trialkit.models.cassette_http import replay_problem
from trialkit.models.cassette_tools import cassette_stats, verify_cassette

MODEL = "openai/gpt-4o-mini"
EVENTS = [
    'data: {"id": "c1", "choices": [{"index": 0, "delta": {"content": "Paris"}}]}\n\n',
    'data: {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
    "data: [DONE]\n\n",
]
REQUEST = {
    "schema_version": 1,
    "api": "chat",
    "model": MODEL,
    "body": {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    },
}
STREAMED = {"status": 200, "content_type": "text/event-stream", "events": EVENTS}
PLAIN = {"status": 200, "content_type": "application/json", "json": {"choices": []}}


def recording(answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "key": key_of(REQUEST),
        "kind": "http",
        "model": MODEL,
        "request": copy.deepcopy(REQUEST),
        "responses": [
            {"trial": 0, "occurrence": 0, "recorded_at": "2026-12-06T10:00:00Z", "response": answer}
        ],
    }


MISSING = object()
VALUES: list[Any] = [MISSING, None, True, 0, -1, 2**70, 1.5, "", "x", [], [1], {}, {"a": 1}]
PATHS: list[tuple[Any, ...]] = [
    ("schema_version",),
    ("key",),
    ("kind",),
    ("model",),
    ("request",),
    ("request", "schema_version"),
    ("request", "api"),
    ("request", "model"),
    ("request", "body"),
    ("responses",),
    ("responses", 0),
    ("responses", 0, "trial"),
    ("responses", 0, "occurrence"),
    ("responses", 0, "recorded_at"),
    ("responses", 0, "response"),
    ("responses", 0, "response", "status"),
    ("responses", 0, "response", "content_type"),
    ("responses", 0, "response", "events"),
    ("responses", 0, "response", "events", 0),
    ("responses", 0, "response", "events", -1),
    ("responses", 0, "response", "json"),
    ("responses", 0, "response", "text"),
    ("responses", 0, "response", "closed_early"),
]
OBJECTS: list[tuple[Any, ...]] = [(), ("request",), ("responses", 0), ("responses", 0, "response")]


def mutated(base: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    holder = data
    for step in path[:-1]:
        holder = holder[step]
    last = path[-1]
    if isinstance(holder, list):
        if value is MISSING:
            del holder[last]
        else:
            holder[last] = value
    elif value is MISSING:
        holder.pop(last, None)
    else:
        holder[last] = value
    return data


def mutations() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, base in (("streamed", recording(STREAMED)), ("plain", recording(PLAIN))):
        for path in PATHS:
            if path[-2:-1] == ("events",) and name == "plain":
                continue  # no events to change
            for value in VALUES:
                shown = "missing" if value is MISSING else json.dumps(value)
                yield f"{name} {'.'.join(map(str, path))}={shown}", mutated(base, path, value)
        for path in OBJECTS:
            yield f"{name} extra in {path}", mutated(base, (*path, "zzz"), 1)


def check(root: Path, path: Path) -> str:
    """Read `path` as every reader does; what became of it."""
    try:
        answer = Cassette(root, CacheMode.REPLAY).lookup_http(
            MODEL, path.stem, trial=0, occurrence=0
        )
    except CassetteError as exc:
        message = str(exc)
        assert message.startswith(f"{path}: ") and "\n" not in message, message
        refused = True
    else:
        refused = False
        if answer is not None:
            assert replay_problem("chat", answer) is None, answer
    problems = verify_cassette(root)
    assert all(p.startswith(f"{path}: ") and "\n" not in p for p in problems), problems
    assert problems or not refused, "a replay refused what verify accepts"
    stats = cassette_stats(root)
    assert stats.files == 1
    return "refused" if refused else "flagged" if problems else "fit"


def test_every_field_missing_wrong_typed_or_extra(tmp_path: Path) -> None:
    folder = tmp_path / "openai__gpt-4o-mini" / key_of(REQUEST)[:2]
    folder.mkdir(parents=True)
    path = folder / f"{key_of(REQUEST)}.json"
    seen: dict[str, str] = {}
    for name, data in mutations():
        path.write_text(json.dumps(data), encoding="utf-8")
        seen[name] = check(tmp_path, path)
    path.write_text(json.dumps(recording(STREAMED)), encoding="utf-8")
    assert check(tmp_path, path) == "fit"
    # Every wrong type of an answer's field is refused at replay, not only flagged:
    for field in ("status", "content_type", "events", "text", "closed_early"):
        for value in VALUES[1:]:
            name = f"streamed responses.0.response.{field}={json.dumps(value)}"
            if field == "closed_early" and value is True:
                continue  # says the agent closed it early: a whole stream is fine either way
            if field == "content_type" and value in ("text/event-stream",):
                continue
            assert seen[name] == "refused", name
    assert seen["streamed responses.0.response.events=missing"] == "refused"
    assert seen["streamed responses.0.response.events.-1=missing"] == "fit"  # a finish_reason
    cut = mutated(recording(STREAMED), ("responses", 0, "response", "events"), EVENTS[:1])
    path.write_text(json.dumps(cut), encoding="utf-8")
    assert check(tmp_path, path) == "refused"
    assert seen["streamed extra in ('responses', 0, 'response')"] == "refused"


_leaves = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6)
)
_json = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(
    max_examples=80,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_edits_of_a_recording(fuzz_root: Path, data: st.DataObject) -> None:
    base = recording(data.draw(st.sampled_from([STREAMED, PLAIN])))
    nodes: list[tuple[Any, ...]] = []

    def walk(value: Any, at: tuple[Any, ...]) -> None:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            nodes.append((*at, key))
            if isinstance(item, dict | list):
                walk(item, (*at, key))

    walk(base, ())
    edited = base
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(nodes))
        try:
            edited = mutated(edited, path, data.draw(_json | st.just(MISSING)))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit took that place away
    folder = fuzz_root / "openai__gpt-4o-mini" / key_of(REQUEST)[:2]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key_of(REQUEST)}.json"
    path.write_text(json.dumps(edited), encoding="utf-8")
    event(check(fuzz_root, path))
