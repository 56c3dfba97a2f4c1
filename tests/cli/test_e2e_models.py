"""`trialkit run` with a real model endpoint (the fake server) and cassettes, as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.provider_server import ProviderServer, Reply

pytestmark = pytest.mark.e2e

SUITE = """
from trialkit import Suite, Task, graders
suite = Suite(id="capitals", kind="capability", trials=2, tasks=[
    Task(id="france", input="Capital of France?", graders=[graders.contains("paris")]),
])
"""
KEY = "sk-e2e-secret-key-0123456789abcdef"


def trialkit(work: Path, *args: str, base_url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRIALKIT_STORE": str(work / "store.db"),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": KEY,
        "TRIALKIT_MODEL": "openai/gpt-4o-mini",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "trialkit", "run", "suite.py", "--no-progress", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_record_with_the_cli_then_replay_offline(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    with ProviderServer() as server:
        server.script(Reply("Paris"), Reply("Lyon"))
        url = server.openai_base_url
        out = trialkit(
            tmp_path,
            "--cache",
            "cassette",
            "--cache-mode",
            "record",
            "--concurrency",
            "1",
            "--json",
            "recorded.json",
            base_url=url,
        )
        assert out.returncode == 0, out.stderr
        assert server.request_count == 2
    recorded = json.loads((tmp_path / "recorded.json").read_text())
    assert recorded["run"]["config"]["model"] == "openai/gpt-4o-mini"
    assert [r["output"] for r in recorded["tasks"][0]["results"]] == ["Paris", "Lyon"]
    assert recorded["summary"]["cost_usd"] > 0

    out = trialkit(
        tmp_path,
        "--cache",
        "cassette",
        "--cache-mode",
        "replay",
        "--json",
        "replayed.json",
        base_url=url,
    )
    assert out.returncode == 0, out.stderr
    replayed = json.loads((tmp_path / "replayed.json").read_text())

    def timeless(results: list[dict[str, object]]) -> list[dict[str, object]]:
        return [
            {k: v for k, v in r.items() if k not in ("duration_s", "started_at")} for r in results
        ]

    assert timeless(replayed["tasks"][0]["results"]) == timeless(recorded["tasks"][0]["results"])
    assert (tmp_path / "cassette" / ".last-run.json").exists()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path

    out = trialkit(
        tmp_path, "--cache", "cassette", "--cache-mode", "replay", "--trials", "3", base_url=url
    )
    assert out.returncode == 3
    assert "replay found no recording for task 'france', trial 2" in out.stdout


def test_cache_mode_needs_a_folder(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    out = trialkit(tmp_path, "--cache-mode", "replay", base_url="http://127.0.0.1:9/v1")
    assert out.returncode == 2
    assert "--cache-mode replay needs --cache DIR" in out.stderr
    out = trialkit(
        tmp_path, "--cache", "nowhere", "--cache-mode", "replay", base_url="http://127.0.0.1:9/v1"
    )
    assert out.returncode == 2
    assert "no such folder to replay from" in out.stderr


def test_an_unknown_model_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    out = trialkit(tmp_path, "--model", "acme/x", base_url="http://127.0.0.1:9/v1")
    assert out.returncode == 2
    assert "unknown provider 'acme'" in out.stderr
