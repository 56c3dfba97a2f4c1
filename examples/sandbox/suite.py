"""Claude Code fixes a bug in a small project, in a bubblewrap sandbox, and the project's own
tests, run in the same sandbox after it, grade the fix.

    trialkit run examples/sandbox/suite.py:suite \
        --cache examples/sandbox/cassette --cache-mode replay --offline

The agent's turns run in the trial's `bwrap` sandbox: the host's `/usr` read-only, the
trial's copy of `project/` read-write, its own `/tmp` and HOME, no network but trialkit's
model proxy (`model-only`); Claude Code's own installation is bound in read-only. When the
agent is done, the `tests_pass` grader runs `python3 -m unittest` in that same sandbox, in
its grader phase (no network at all), on the files the agent left.
"""

from __future__ import annotations

import os
from pathlib import Path

from trialkit import Suite, Task
from trialkit.environments.workspace import Workspace
from trialkit.graders import only_changed, tool_called
from trialkit.graders.base import GradeContext
from trialkit.harness import SubprocessAgent
from trialkit.score import Score, Verdict

HERE = Path(__file__).resolve().parent


async def tests_pass(ctx: GradeContext) -> Score:
    """The project's own tests, in the trial's sandbox, after the agent."""
    assert ctx.sandbox is not None, "the trial has a sandbox: its workspace's"
    result = await ctx.sandbox.exec(
        ["python3", "-m", "unittest", "-q"], env={"PYTHONDONTWRITEBYTECODE": "1"}, timeout=120
    )
    result.raise_for_limit()  # a limit hit is the trial's error, not a fail
    passed = result.returncode == 0
    where = f"{ctx.sandbox.info.provider} sandbox"
    return Score(
        value=1.0 if passed else 0.0,
        verdict=Verdict.PASS if passed else Verdict.FAIL,
        rationale=f"in the {where}: " + result.stderr_text.strip().splitlines()[-1],
    )


def suite() -> Suite:
    agent = SubprocessAgent.claude_code(
        model="claude-sonnet-4-5",
        allowed_tools=["Read", "Edit"],
        executable=os.environ.get("CLAUDE", "claude"),
        timeout=120,
    ).in_sandbox("bwrap")
    return Suite(
        id="sandbox-fix-mean",
        description="Claude Code fixes a bug in a sandbox; the project's tests grade it there.",
        kind="regression",
        trials=3,
        harness=agent,
        environment=Workspace(HERE / "project"),
        tasks=[
            Task(
                id="fix-mean",
                input=(
                    "The tests of this project fail: mean() in stats.py returns the wrong "
                    "value. Fix the bug in stats.py and change nothing else."
                ),
                timeout=180,
                graders=[tests_pass, only_changed("stats.py"), tool_called("Edit")],
            )
        ],
    )
