"""examples/agents_sdk replays offline from its committed cassette: an OpenAI Agents SDK agent,
unchanged, with its model calls and tool calls in every transcript, and a strict replay that
says what it misses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agents_sdk"
REPLAY = ["--cache", "agents_sdk/cassette", "--cache-mode", "replay", "--offline"]
TASKS = {"snow-in-oslo": "Oslo", "sunglasses-in-lisbon": "Lisbon", "no-forecast-for-mars": "Mars"}

pytestmark = pytest.mark.e2e


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the example: a replay writes the cassette's manifest, and the repo stays as
    it is."""
    shutil.copytree(EXAMPLE, tmp_path / "agents_sdk", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def trialkit(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "TRIALKIT_")) and name != "WEATHER_AGENT_MODEL"
    }
    # No key, no base URL: the SDK addresses api.openai.com, as in production; the cassette
    # answers, and --offline would refuse anything that got past it.
    return subprocess.run(
        [sys.executable, "-m", "trialkit", *args, "--store", str(folder / "store.db")],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def replay(folder: Path, report: str) -> dict[str, Any]:
    done = trialkit(folder, "run", "agents_sdk/evals.py", *REPLAY, "--json", report, "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    data: dict[str, Any] = json.loads((folder / report).read_text())
    return data


def verdicts(report: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    return {
        task["id"]: [(trial["verdict"], trial["output"]) for trial in task["results"]]
        for task in report["tasks"]
    }


def test_the_committed_cassette_replays_the_agent_offline_and_the_same_every_time(
    folder: Path,
) -> None:
    report = replay(folder, "first.json")
    assert report["run"]["config"]["cache"]["mode"] == "replay"
    assert {t["id"]: (t["verdict"], t["passed"], t["trials"]) for t in report["tasks"]} == {
        task: ("pass", 3, 3) for task in TASKS
    }
    summary = report["summary"]
    assert (summary["errors"], summary["failed"]) == (0, 0)
    assert summary["usage"]["input_tokens"] > 0 and summary["cost_usd"] > 0  # priced replays

    run = report["run"]["id"]
    for task, city in TASKS.items():
        shown = trialkit(folder, "transcripts", "show", f"{run}/{task}#2", "--json")
        assert shown.returncode == 0, shown.stderr
        transcript = json.loads(shown.stdout)["transcript"]
        (tool_call,) = transcript["tool_calls"]
        assert (tool_call["name"], tool_call["arguments"]) == ("get_weather", {"city": city})
        assert tool_call["result"] and not tool_call["is_error"]
        calls = transcript["model_calls"]
        assert [(c["model"], c["role"], c["status"], c["replayed"]) for c in calls] == [
            ("openai/gpt-4.1-mini", "agent", 200, True)
        ] * 2
        assert all(c["endpoint"].endswith("/v1/responses") for c in calls)
        assert [c["response"]["finish_reason"] for c in calls] == ["tool_calls", "stop"]
        assert all(c["usage"]["output_tokens"] > 0 for c in calls)

    again = replay(folder, "again.json")
    assert verdicts(again) == verdicts(report)


def test_a_replay_that_finds_no_recording_is_a_cassette_miss_not_a_connection_error(
    folder: Path,
) -> None:
    for recording in (folder / "agents_sdk" / "cassette").rglob("*.json"):
        recording.unlink()
    done = trialkit(folder, "run", "agents_sdk/evals.py", *REPLAY, "--json", "r.json", "-q")
    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads((folder / "r.json").read_text())
    errors = [trial["error"] for task in report["tasks"] for trial in task["results"]]
    assert len(errors) == 9
    for error in errors:
        assert error["type"] == "CassetteMiss"
        assert "replay found no recording for task" in error["message"]
        endpoint = "model openai/gpt-4.1-mini at POST https://api.openai.com/v1/responses"
        assert endpoint in error["message"]
        assert "Connection error" not in error["message"]
