"""Fuzzing the readers of what trialkit stored: mutated cassette files, mutated store rows and
deeply nested suite files give a clean result or the reader's own one-line error
(`CassetteError`, `StoreError`, `SuiteError`), never another exception, in bounded time."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, create_engine, select, update
from sqlalchemy.exc import IntegrityError, StatementError

from tests.store._samples import make_sample
from trialkit.loaders.target import load_target
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import Cassette, CassetteError
from trialkit.models.cassette_tools import cassette_stats, verify_cassette
from trialkit.store import Store, StoreError
from trialkit.store import queries as store_queries
from trialkit.store.schema import runs, trials
from trialkit.store.urls import sqlite_url
from trialkit.task import SuiteError
from trialkit.transcript import Message, ToolCall, Usage

READERS = settings(
    max_examples=60,
    deadline=timedelta(seconds=10),  # per input; a shared CI machine is slow, not hung
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

_json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
)
_json = st.recursive(
    _json_leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)


def _nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


@st.composite
def _json_edits(draw: st.DrawFn, document: Any) -> str:
    """`document` with some values replaced (by other JSON, or by very deep nesting), as text,
    then perhaps cut or with characters changed."""
    paths: list[tuple[Any, Any]] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            paths.extend((value, key) for key in value)
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            paths.extend((value, index) for index in range(len(value)))
            for item in value:
                collect(item)

    collect(document)
    deep_marker = "\x00deep\x00"
    for _ in range(draw(st.integers(0, 3))):
        container, key = draw(st.sampled_from(paths))
        if draw(st.integers(0, 5)) == 0:
            container[key] = deep_marker
        else:
            container[key] = draw(_json)
    text = json.dumps(document)
    text = text.replace(json.dumps(deep_marker), _nested(draw(st.sampled_from([50, 150, 5000]))))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(max_size=4)) + text[at + draw(st.integers(0, 4)) :]
    return text


def _refusal(expected: type[Exception], read: Callable[[], object]) -> str | None:
    """The message of the `expected` error `read` raised, or `None` when it returned; any
    other exception fails the test."""
    try:
        read()
    except expected as exc:
        return str(exc)
    return None


# --- cassettes -------------------------------------------------------------------------------

MODEL = "openai/gpt-4o-mini"
REQUEST = ModelRequest(messages=[Message(role="user", content="hi")])


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("cassette")
    response = ModelResponse(
        message=Message(
            role="assistant",
            content="hello",
            tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 1})],
        ),
        usage=Usage(input_tokens=3, output_tokens=1),
    )
    cassette = Cassette(root, "record")
    for trial in range(2):
        cassette.record(MODEL, REQUEST, response, trial=trial, occurrence=0)
    [path] = root.glob("*/*/*.json")
    return root, path, path.read_text(encoding="utf-8")


@READERS
@given(data=st.data())
def test_mutated_cassette_files(recording: tuple[Path, Path, str], data: st.DataObject) -> None:
    root, path, original = recording
    text = data.draw(_json_edits(json.loads(original)), label="recording")
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    written = path.read_bytes()
    stats = cassette_stats(root)
    assert stats.files == 1
    problems = verify_cassette(root)
    assert all(problem.startswith(f"{path}: ") and "\n" not in problem for problem in problems)
    refused = _refusal(
        CassetteError,
        lambda: Cassette(root, "replay").lookup(MODEL, REQUEST, trial=0, occurrence=0),
    )
    assert refused is None or str(path) in refused
    event("refused" if refused else "replayed or missed")
    assert path.read_bytes() == written  # a reader never rewrites a recording


# --- store rows ------------------------------------------------------------------------------

RUN = "fuzz-run"
_RUN_COLUMNS = ["started_at", "finished_at", "config", "suite_kind"]
_TEXT_COLUMNS = [
    "verdict",
    "status",
    "started_at",
    "scores",
    "usage",
    "error",
    "grader_usage",
    "transcript",
    "outcome",
    "expect",
]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Engine, Any, Any]]:
    url = sqlite_url(tmp_path_factory.mktemp("store") / "trialkit.db")
    sample = make_sample(RUN)
    with Store(url) as store:
        store.create_run(sample.run, sample.suite, sample.plans)
        store.save_trials(sample.trials)
    engine = create_engine(url)
    key = (trials.c.run_id == RUN, trials.c.task_id == "france", trials.c.idx == 0)
    with engine.connect() as conn:
        row = conn.execute(select(trials).where(*key)).one()
        run_row = conn.execute(select(runs).where(runs.c.id == RUN)).one()
    yield url, engine, row, run_row
    engine.dispose()


def _text_values(original: str | None) -> st.SearchStrategy[Any]:
    mutated = (
        st.just(original)
        if original is None
        else st.builds(
            lambda at, junk: original[:at] + junk + original[at + 1 :],
            st.integers(0, len(original)),
            st.text(max_size=3),
        )
    )
    return (
        mutated
        | _json.map(json.dumps)
        | st.sampled_from(["", "{", "null", "[]", "maybe", "2025-13-01", _nested(5000), "NaN"])
        | st.none()
        | st.integers()
        | st.floats()
    )


@READERS
@given(data=st.data())
def test_mutated_store_rows(stored: tuple[str, Engine, Any, Any], data: st.DataObject) -> None:
    url, engine, row, run_row = stored
    key = (trials.c.run_id == RUN, trials.c.task_id == "france", trials.c.idx == 0)
    changes: dict[str, Any] = {}
    for column in data.draw(st.lists(st.sampled_from(_TEXT_COLUMNS), min_size=1, max_size=3)):
        changes[column] = data.draw(_text_values(getattr(row, column)), label=column)
    if data.draw(st.booleans(), label="packed"):
        packed = st.binary(max_size=12) | st.just(b"z" + zlib.compress(b"\xff{")) | st.none()
        changes["transcript_packed"] = data.draw(packed, label="transcript_packed")
    if data.draw(st.integers(0, 4)) == 0:
        run_column = data.draw(st.sampled_from(_RUN_COLUMNS))
        run_change = data.draw(_text_values("2025-03-01T12:00:00+00:00"), label=run_column)
    else:
        run_column = run_change = None
    try:
        with engine.begin() as conn:
            conn.execute(update(trials).where(*key), changes)
            if run_column is not None:
                conn.execute(update(runs).where(runs.c.id == RUN), {run_column: run_change})
    except (IntegrityError, StatementError, OverflowError):
        assume(False)  # the database itself refused the value (SQLite: ints past 64 bits)
    try:
        with Store(url) as store:
            for read in (
                lambda: store.load_trial(RUN, "france", 0),
                lambda: list(store.iter_trials(RUN)),
                lambda: store.load_report(RUN),
                lambda: store.load_report(RUN, max_results=1),
                lambda: store.list_runs(),
                lambda: store_queries.list_trials(store, RUN),
            ):
                message = _refusal(StoreError, read)
                assert message is None or ("\n" not in message and RUN in message), message
                event("refused" if message else "read")
    finally:
        restore = {column: getattr(row, column) for column in changes}
        with engine.begin() as conn:
            conn.execute(update(trials).where(*key), restore)
            conn.execute(
                update(runs).where(runs.c.id == RUN),
                {column: getattr(run_row, column) for column in _RUN_COLUMNS},
            )


# --- suite files, nested and aliased ---------------------------------------------------------


@pytest.fixture(scope="module")
def suite_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("suites")


@READERS
@given(
    depth=st.integers(0, 1200),
    where=st.sampled_from(["metadata", "input", "graders", "tags", "prompts"]),
    as_json=st.booleans(),
    flow=st.booleans(),
)
def test_nested_suite_files(
    suite_folder: Path, depth: int, where: str, as_json: bool, flow: bool
) -> None:
    value = _nested(depth, '"x"')
    fields = {"id": '"s"', "model": '"scripted/x"'}
    if where == "prompts":  # looks like a promptfoo config
        body = f'{{"prompts": {value}, "tests": [{{"vars": {{"a": 1}}}}]}}'
    else:
        task = {"id": '"a"', "input": '"hi"', where: value}
        tasks = "[{" + ", ".join(f'"{k}": {v}' for k, v in task.items()) + "}]"
        body = "{" + ", ".join(f'"{k}": {v}' for k, v in {**fields, "tasks": tasks}.items()) + "}"
    if as_json:
        path = suite_folder / "suite.json"
        path.write_text(body, encoding="utf-8")
    else:
        path = suite_folder / "suite.yaml"
        text = body if flow else _block_yaml(json.loads(body) if depth < 400 else None, body)
        path.write_text(text, encoding="utf-8")
    refused = _refusal(SuiteError, lambda: load_target(str(path)))
    assert refused is None or str(path) in refused
    event("refused" if refused else "loaded")


def _block_yaml(data: Any, fallback: str) -> str:
    """Block-style YAML (indentation, not brackets) for `data`, when it could be built."""
    if data is None:
        return fallback
    import yaml

    try:
        return str(yaml.safe_dump(data, default_flow_style=False))
    except RecursionError:
        return fallback
