"""Corrupted and deeply nested cassette files: `cache stats` counts them as unreadable, `cache
verify` names each with what is wrong (one line), replay raises `CassetteError` naming the
file, and nothing is rewritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit.cli.cache import cache_command
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import MANIFEST, Cassette, CassetteError
from trialkit.transcript import Message, Usage

MODEL = "openai/gpt-4o-mini"
REQUEST = ModelRequest(messages=[Message(role="user", content="hi")])


def _recorded(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "cassette"
    response = ModelResponse(message=Message(role="assistant", content="hello"), usage=Usage())
    Cassette(root, "record").record(MODEL, REQUEST, response, trial=0, occurrence=0)
    [path] = root.glob("*/*/*.json")
    return root, path


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


CORRUPTIONS = {
    "deep_request": lambda text: text.replace(
        '"messages": [', f'"deep": {_deep(5000)}, "messages": ['
    ),
    "deep_response": lambda text: text.replace('"content": "hello"', f'"content": {_deep(900)}'),
    "moderately_deep": lambda text: text.replace('"content": "hello"', f'"content": {_deep(150)}'),
    "truncated": lambda text: text[: len(text) // 2],
    "not_utf8": lambda text: "\udcff",
    "a_list": lambda text: "[1, 2]",
    "request_a_list": lambda text: json.dumps({**json.loads(text), "request": [1]}),
    "responses_null": lambda text: json.dumps({**json.loads(text), "responses": None}),
    "trial_negative": lambda text: text.replace('"trial": 0', '"trial": -1'),
    "trial_huge": lambda text: text.replace('"trial": 0', '"trial": 1' + "0" * 5000),
    "naive_time": lambda text: text.replace("+00:00", "").replace("Z", ""),
    "kind_unknown": lambda text: text.replace('"kind": "model"', '"kind": "video"'),
    "model_number": lambda text: json.dumps({**json.loads(text), "model": 5}),
    "key_number": lambda text: json.dumps({**json.loads(text), "key": 5}),
}


def _write(path: Path, text: str) -> None:
    if text == "\udcff":
        path.write_bytes(b"\xff\xfe{")
    else:
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupted_recording_is_named_never_a_traceback(tmp_path: Path, kind: str) -> None:
    root, path = _recorded(tmp_path)
    _write(path, CORRUPTIONS[kind](path.read_text(encoding="utf-8")))
    before = path.read_bytes()
    runner = CliRunner()

    stats = runner.invoke(cache_command, ["stats", str(root)])
    assert stats.exit_code == 0, stats.output
    assert stats.exception is None
    assert "1 file(s) could not be read" in stats.stdout

    verify = runner.invoke(cache_command, ["verify", str(root)])
    assert verify.exit_code == 1, verify.output
    assert isinstance(verify.exception, SystemExit)
    lines = verify.stdout.strip().splitlines()
    assert lines and all(line.startswith(f"{path}: ") for line in lines), verify.stdout
    assert "Traceback" not in verify.output

    with pytest.raises(CassetteError, match=str(path)):
        Cassette(root, "replay").lookup(MODEL, REQUEST, trial=0, occurrence=0)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "manifest",
    [
        "{",
        "[1]",
        '{"schema_version": 2, "suites": {"s": {"keys": [[1]]}}}',
        '{"schema_version": 1, "keys": 5}',
        '{"schema_version": 2, "suites": {"s": {"keys": ' + _deep(5000) + "}}}",
    ],
)
def test_a_corrupted_manifest_is_one_line_for_prune(tmp_path: Path, manifest: str) -> None:
    root, path = _recorded(tmp_path)
    (root / MANIFEST).write_text(manifest, encoding="utf-8")
    result = CliRunner().invoke(cache_command, ["prune", str(root)])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and MANIFEST in line
    assert path.exists()
