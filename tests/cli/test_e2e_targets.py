"""`trialkit run` and `trialkit validate` on every kind of TARGET, as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

BAD = """id: bad
kind: nightly
tasks:
  - id: a
    input: hi
    graders:
      - contain: x
"""


def trialkit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trialkit", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TRIALKIT_STORE": str(tmp_path / "store.db"), "NO_COLOR": "1"},
    )


@pytest.mark.parametrize(
    ("target", "extra"),
    [
        (EXAMPLES / "suites" / "capitals", []),
        (EXAMPLES / "suites" / "echo-json", []),
        (EXAMPLES / "imports" / "promptfoo" / "promptfooconfig.yaml", []),
        (
            f"evals:{EXAMPLES / 'imports' / 'openai_evals' / 'arithmetic.jsonl'}",
            ["--model", "scripted/echo"],
        ),
        (EXAMPLES / "imports" / "inspect" / "capitals.jsonl", ["--model", "scripted/echo"]),
    ],
)
def test_every_target_kind_runs(tmp_path: Path, target: object, extra: list[str]) -> None:
    validated = trialkit(tmp_path, "validate", str(target))
    assert validated.returncode == 0, validated.stderr
    assert validated.stdout.startswith("ok: suite ")
    out = trialkit(tmp_path, "run", str(target), "-q", *extra)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " tasks passed, pass rate " in out.stdout


def test_a_bad_suite_file_lists_every_problem_and_runs_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD)
    for command in ("validate", "run"):
        out = trialkit(tmp_path, command, "bad.yaml")
        assert out.returncode == 2
        lines = out.stderr.strip().splitlines()
        assert lines[0].startswith("bad.yaml:2: kind: ")
        assert lines[1].startswith("bad.yaml:7: tasks[0].graders[0]: unknown grader 'contain'")
        assert lines[-1] == "error: 2 problems in bad.yaml"
    assert not (tmp_path / "store.db").exists() or "bad" not in trialkit(tmp_path, "runs").stdout
