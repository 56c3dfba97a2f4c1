"""What the install tests share: running the installed `trialkit` command, suite files.
Standard library and pytest only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

INSTALL_VAR = "TRIALKIT_TEST_INSTALL"
"""Names the install under test in the environment `.ci/installs.sh` made for it: `core`, or
an extra (`view`, `openai`, ...)."""
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300


def spec_of(install: str) -> str:
    """What `pip install` is given for an install: `trialkit` or `trialkit[view]`."""
    return "trialkit" if install == "core" else f"trialkit[{install}]"


def trialkit(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """The installed `trialkit` command (the console script of this environment)."""
    command = Path(sys.executable).with_name("trialkit")
    return subprocess.run(
        [str(command), *args],
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def python(
    code: str, *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`code` run by this environment's Python in a process of its own."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    """What a finished command printed, for an assertion's message."""
    out, err = done.stdout[-3000:], done.stderr[-3000:]
    return f"exit {done.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


def readme_python_blocks() -> list[str]:
    """The README's ```python blocks, as a reader copies them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    fence = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
    return [match.group(1) for match in fence.finditer(text)]


CAPITALS = """
from trialkit import Suite, Task, graders


def agent(prompt: str) -> str:
    return "The capital of France is Paris." if "France" in prompt else "Berlin"


suite = Suite(
    id="capitals",
    kind="{kind}",
    trials=2,
    harness=agent,
    tasks=[
        Task(id="france", input="What is the capital of France?",
             graders=[graders.contains("paris")]),
        Task(id="spain", input="What is the capital of Spain?",
             graders=[graders.contains("madrid")]),
    ],
)
"""


def write_capitals(folder: Path, kind: str = "capability") -> Path:
    """A Python suite file of two tasks: `france` passes, `spain` fails."""
    path = folder / "capitals.py"
    path.write_text(CAPITALS.replace("{kind}", kind), encoding="utf-8")
    return path
