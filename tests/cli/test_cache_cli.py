"""`trialkit cache stats|verify|prune DIR`: output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit.cli.cache import cache_command
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import MANIFEST, Cassette
from trialkit.transcript import Message, Usage

MODEL = "openai/gpt-4o-mini"


def req(text: str) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)])


def resp(text: str = "hello") -> ModelResponse:
    return ModelResponse(
        message=Message(role="assistant", content=text),
        usage=Usage(input_tokens=3, output_tokens=1),
    )


def path_of(root: Path, text: str, model: str = MODEL) -> Path:
    key = req(text).key(model)
    return root / model.replace("/", "__") / key[:2] / f"{key}.json"


@pytest.fixture
def cassette_dir(tmp_path: Path) -> Path:
    root = tmp_path / "cassette"
    cassette = Cassette(root, "record")
    for trial in range(3):
        cassette.record(MODEL, req("hi"), resp(f"hello {trial}"), trial=trial, occurrence=0)
    cassette.record(MODEL, req("bye"), resp(), trial=0, occurrence=0)
    cassette.record("anthropic/claude", req("hi"), resp(), trial=0, occurrence=0)
    return root


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cache_command, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_stats_table(cassette_dir: Path) -> None:
    code, out, _ = invoke("stats", str(cassette_dir))
    assert code == 0
    assert MODEL in out
    assert "anthropic/claude" in out
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert total.split()[1:3] == ["3", "5"]  # files, recordings
    assert "recorded between" in out


def test_stats_json(cassette_dir: Path) -> None:
    code, out, _ = invoke("stats", str(cassette_dir), "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["files"], data["recordings"], data["invalid_files"]) == (3, 5, 0)
    assert data["models"][MODEL]["recordings"] == 4
    assert data["models"]["anthropic/claude"]["files"] == 1
    assert data["oldest"] is not None


def test_stats_of_a_missing_folder_is_bad_usage(tmp_path: Path) -> None:
    code, _, err = invoke("stats", str(tmp_path / "nope"))
    assert code == 2
    assert err.strip() == f"error: {tmp_path / 'nope'}: no such cassette folder"


def test_verify_clean(cassette_dir: Path) -> None:
    code, out, _ = invoke("verify", str(cassette_dir))
    assert code == 0
    assert "all recordings are valid" in out


def test_verify_reports_each_problem_and_exits_1(cassette_dir: Path) -> None:
    edited = path_of(cassette_dir, "hi")
    data = json.loads(edited.read_text())
    data["request"]["messages"][0]["content"] = "hi there"
    edited.write_text(json.dumps(data, indent=2))
    corrupt = path_of(cassette_dir, "bye")
    corrupt.write_text("not json")

    code, out, err = invoke("verify", str(cassette_dir))
    assert code == 1
    lines = out.splitlines()
    assert len(lines) == 2
    assert any(line.startswith(f"{edited}: ") and "hashes to" in line for line in lines)
    assert any(line.startswith(f"{corrupt}: ") and "not readable JSON" in line for line in lines)
    assert "2 problem(s)" in err


def test_prune_without_manifest_is_bad_usage(cassette_dir: Path) -> None:
    code, out, err = invoke("prune", str(cassette_dir))
    assert code == 2
    assert out == ""
    assert err.startswith("error: ")
    assert len(err.strip().splitlines()) == 1
    assert "run once with the cassette first" in err


def test_prune_dry_run_then_prune(cassette_dir: Path) -> None:
    replay = Cassette(cassette_dir, "replay")
    assert replay.lookup(MODEL, req("hi"), trial=0, occurrence=0) is not None
    replay.write_manifest()
    assert (cassette_dir / MANIFEST).exists()
    stale = {path_of(cassette_dir, "bye"), path_of(cassette_dir, "hi", "anthropic/claude")}

    code, out, _ = invoke("prune", str(cassette_dir), "--dry-run")
    assert code == 0
    assert {Path(line.removeprefix("would remove ")) for line in out.splitlines()[:-1]} == stale
    assert out.splitlines()[-1] == "would remove 2 recording file(s)"
    assert all(path.exists() for path in stale)

    code, out, _ = invoke("prune", str(cassette_dir))
    assert code == 0
    assert {Path(line.removeprefix("removed ")) for line in out.splitlines()[:-1]} == stale
    assert not any(path.exists() for path in stale)
    assert path_of(cassette_dir, "hi").exists()
    code, out, _ = invoke("stats", str(cassette_dir), "--json")
    assert json.loads(out)["files"] == 1
