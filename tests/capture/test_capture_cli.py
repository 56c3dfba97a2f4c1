"""The command line with an unmodified agent: record, replay offline (also in worker
processes), `--no-capture`, and what a miss or a refusal prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.capture.helpers import KEY
from tests.fakes.provider_server import ProviderServer, RoundTrip

pytestmark = pytest.mark.e2e

SUITE = textwrap.dedent(
    """
    import os

    import openai

    from trialkit import Suite, Task, graders


    def agent(prompt: str) -> str:
        client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY, as in production
        try:
            answer = client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
            )
        finally:
            client.close()
        return answer.choices[0].message.content or ""


    suite = Suite(
        id="cities",
        trials=3,
        harness=agent,
        tasks=[
            Task(id=city.lower(), input=city, graders=[graders.contains(city)])
            for city in ("Paris", "Rome", "Oslo")
        ],
    )
    """
)


def trialkit(work: Path, base_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "TRIALKIT_STORE": str(work / "store.db"),
        "NO_COLOR": "1",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": KEY,
        "OPENAI_MAX_RETRIES": "0",
    }
    return subprocess.run(
        [sys.executable, "-m", "trialkit", "run", "suite.py", "--no-progress", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def report(work: Path) -> dict[str, object]:
    return json.loads((work / "report.json").read_text())  # type: ignore[no-any-return]


def test_record_then_replay_offline_in_this_process_and_in_workers(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    with ProviderServer(default=RoundTrip()) as server:
        url = server.openai_base_url
        recorded = trialkit(tmp_path, url, "--cache", "cassette", "--cache-mode", "record")
        assert recorded.returncode == 0, recorded.stderr
        calls = len(server.requests)
        connections = server.connections
        server.stop()
        assert calls == 9
        for workers in ("1", "2"):
            replayed = trialkit(
                tmp_path,
                url,
                "--cache",
                "cassette",
                "--cache-mode",
                "replay",
                "--offline",
                "--workers",
                workers,
                "--json",
                "report.json",
            )
            assert replayed.returncode == 0, replayed.stderr
            summary = report(tmp_path)["summary"]
            assert summary["trials"] == 9 and summary["passed_tasks"] == 3  # type: ignore[index]
            assert summary["cost_usd"] > 0  # type: ignore[index, operator]
        assert server.connections == connections


def test_a_miss_prints_its_own_message_and_exits_3(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    (tmp_path / "cassette").mkdir()
    with ProviderServer() as server:
        missed = trialkit(
            tmp_path, server.openai_base_url, "--cache", "cassette", "--cache-mode", "replay"
        )
        assert server.requests == []  # a replay never lets a model request through
    assert missed.returncode == 3, missed.stderr
    out = missed.stdout + missed.stderr
    assert "CassetteMiss" in out and "replay found no recording" in out
    assert "Connection error" not in out


def test_no_capture_records_nothing_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    with ProviderServer() as server:
        result = trialkit(
            tmp_path,
            server.openai_base_url,
            "--cache",
            "cassette",
            "--cache-mode",
            "record",
            "--no-capture",
        )
    assert result.returncode == 0, result.stderr
    assert "recorded nothing" in result.stderr and "--no-capture" in result.stderr
    assert not (tmp_path / "cassette").exists()
