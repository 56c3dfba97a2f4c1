"""examples/sandbox replays offline from its committed cassette: the real Claude Code CLI in a
bubblewrap sandbox fixes the bug, and the project's own tests, run by the grader in the same
sandbox after it, pass; no key, a network namespace with only a loopback interface, new
workspaces, another day's clock."""

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
from tests.sandbox._bwrap import bwrap_provider

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sandbox"
README = (EXAMPLE / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.e2e


def readme_command() -> list[str]:
    """The replay command of the example's README, as written (its arguments)."""
    joined = re.sub(r"\\\n\s*", " ", README)  # a command continued over lines is one line
    found = re.search(r"^trialkit run (examples/sandbox/.*)$", joined, re.M)
    assert found, "the README shows no `trialkit run examples/sandbox/...` command"
    return found.group(1).split()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the example under examples/ (a replay writes the cassette's manifest)."""
    shutil.copytree(EXAMPLE, tmp_path / "examples" / "sandbox")
    return tmp_path


def test_the_projects_tests_fail_before_the_fix(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE / "project", tmp_path / "project")
    done = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"],
        cwd=tmp_path / "project",
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "FAILED (failures=1)" in done.stderr, done.stderr


def test_the_readme_command_fixes_the_bug_in_bwrap_graded_by_the_tests_there(
    folder: Path,
) -> None:
    bwrap_provider()  # a skip without bubblewrap (a failure under TRIALKIT_REQUIRE_BWRAP=1)
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
        "fix-mean",
        "pass",
        3,
        3,
    )
    for trial in task["results"]:
        assert trial["output"] == "Fixed mean(): it divided by one more than the number of values."
        sandbox = trial["sandbox"]
        assert (sandbox["provider"], sandbox["isolated"]) == ("bwrap", True)
        assert (sandbox["network"], sandbox["grader_network"]) == ("model-only", "none")
        scores = {score["name"]: score for score in trial["scores"]}
        (tests,) = [s for name, s in scores.items() if "tests_pass" in name]
        # the project's tests ran, in the sandbox, on the fixed file
        assert tests["verdict"] == "pass"
        assert tests["rationale"] == "in the bwrap sandbox: OK"
    fixture = folder / "examples/sandbox/project/stats.py"
    assert fixture.read_text() == (EXAMPLE / "project/stats.py").read_text()
    assert "(len(values) + 1)" in fixture.read_text()  # each trial fixed its own copy
