"""examples/claude_code replays offline from its committed cassette, with the real Claude Code
CLI, no key, in a network namespace with only a loopback interface, in new workspaces and with
the agent's clock on another day than the recording's."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_agents.conftest import find_cli, loopback_namespace

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "claude_code"
README = (EXAMPLE / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.e2e


def readme_command() -> list[str]:
    """The replay command of the example's README, as written (its arguments)."""
    joined = re.sub(r"\\\n\s*", " ", README)  # a command continued over lines is one line
    found = re.search(r"^trialkit run (examples/claude_code/.*)$", joined, re.M)
    assert found, "the README shows no `trialkit run examples/claude_code/...` command"
    return found.group(1).split()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the example under examples/ (a replay writes the cassette's manifest)."""
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "claude_code")
    return tmp_path


def test_the_readme_command_replays_claude_code_offline_with_no_key(folder: Path) -> None:
    claude = find_cli("claude")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "OPENAI_", "TRIALKIT_", "CLAUDE"))
    }
    env["PATH"] = f"{Path(claude).parent}{os.pathsep}{env.get('PATH', '')}"
    args = readme_command()
    assert "--offline" in args and "replay" in args
    ours = ["--json", "report.json", "--store", "store.db", "--no-progress"]
    done = subprocess.run(
        [*loopback_namespace(), sys.executable, "-m", "trialkit", "run", *args, *ours],
        cwd=folder,
        env={**env, "TZ": "Etc/GMT-14"},  # not the agent's zone: the trial sets its own
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((folder / "report.json").read_text())
    (task,) = report["tasks"]
    assert (task["id"], task["verdict"], task["passed"], task["trials"]) == (
        "fix-greeting",
        "pass",
        3,
        3,
    )
    for trial in task["results"]:
        assert trial["output"] == 'Fixed the typo: greet.py now says "Hello, world!".'
    assert report["summary"]["usage"]["input_tokens"] > 0  # from the replayed calls
    assert (folder / "examples/claude_code/project/greet.py").read_text() == (
        EXAMPLE / "project/greet.py"
    ).read_text()  # the fixture itself is never edited: each trial has a copy
