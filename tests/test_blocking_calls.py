"""Blocking user code (sync agents, tools, graders) is abandoned when its trial times out: the
trial ends on time, the process exits when the run is over, and a timeout in the middle of an
MCP tool call prints nothing but the report."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio.from_thread

from trialkit import Suite, Task, TrialStatus, run_sync
from trialkit.harness import ToolAgent
from trialkit.models.scripted import ScriptedModel
from trialkit.transcript import ToolCall

FAKE = str(Path(__file__).parent / "agents" / "fake_claude.py")


def run_script(code: str, tmp_path: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script), FAKE],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    return time.monotonic() - started, done


def test_a_blocking_agent_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    took, done = run_script(
        """
        import time
        from trialkit import Suite, Task, run_sync

        def agent(prompt: str) -> str:
            time.sleep(60)
            return "late"

        task = Task(id="t", input="x", timeout=0.5)
        report = run_sync(Suite(id="s", harness=agent, tasks=[task]))
        print(report.tasks[0].results[0].status.value)
        """,
        tmp_path,
    )
    assert done.stdout.strip() == "timeout", done.stderr
    assert took < 30  # it waited 60 s for the abandoned thread


def test_a_timeout_during_a_blocking_mcp_tool_call_is_quiet_and_quick(tmp_path: Path) -> None:
    took, done = run_script(
        """
        import sys, time
        from pathlib import Path
        from trialkit import Suite, Task, run_sync
        from trialkit.harness import SubprocessAgent

        def slow(seconds: float) -> str:
            \"\"\"Sleep.\"\"\"
            Path("started").write_text("yes")
            time.sleep(seconds)
            return "slept"

        agent = SubprocessAgent([sys.executable, sys.argv[1]], tools=[slow])
        task = Task(id="t", input='mcp slow {"seconds": 90}', timeout=8)
        (result,) = run_sync(Suite(id="s", harness=agent, tasks=[task])).tasks[0].results
        print(result.status.value, Path("started").exists())
        """,
        tmp_path,
    )
    assert done.stdout.split() == ["timeout", "True"], done.stderr
    assert done.stderr == ""  # no "Exception in ASGI application" and its tracebacks
    assert took < 60  # the tool's thread (90 s) was abandoned


def test_a_blocking_tool_cannot_hold_up_its_trial() -> None:
    def slow() -> str:
        """Sleep."""
        time.sleep(10)
        return "slept"

    model = ScriptedModel("m", [ToolCall(id="1", name="slow", arguments={}), "done"])
    started = time.monotonic()
    task = Task(id="t", input="x", timeout=0.5)
    (result,) = (
        run_sync(Suite(id="s", harness=ToolAgent(model, [slow]), tasks=[task])).tasks[0].results
    )
    assert result.status is TrialStatus.TIMEOUT
    assert time.monotonic() - started < 5  # it waited for the tool's 10 s


def test_a_sync_agent_still_reaches_the_event_loop_and_its_trial() -> None:
    from trialkit.models import get_model
    from trialkit.models.base import ModelRequest
    from trialkit.transcript import Message

    model = get_model("scripted/echo")

    def agent(prompt: str) -> str:
        request = ModelRequest(messages=[Message(role="user", content=prompt)])
        return anyio.from_thread.run(model.generate, request).text

    report = run_sync(Suite(id="s", harness=agent, tasks=[Task(id="t", input="hello")]))
    (result,) = report.tasks[0].results
    assert result.output == "hello"
    assert result.usage.total_tokens > 0  # the call was recorded in the trial's transcript
