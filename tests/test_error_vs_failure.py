"""Error or failure, for every kind of harness: a harness that times out, cannot start or
gives output it cannot read is an error, never the expected failure of an `expect="failure"`
task, and never "unhandled errors in a TaskGroup", however deep in exception groups it comes.
Only the agent's own failure (a crash, a non-zero exit) can be the expected failure.

The command-line agents are real processes (`tests/agents/fake_claude.py`); with tools, the
MCP tool server runs too, and its task group is what wraps their errors in groups.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from trialkit import Suite, Task, TrialStatus, Verdict, run_sync
from trialkit.harness import HarnessError, SessionHarness, ToolAgent, TrialContext
from trialkit.harness.chat import ChatHarness
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.models._convert import MalformedResponseError
from trialkit.models.base import Model, ModelRequest, ModelResponse
from trialkit.models.retry import RetryPolicy

FAKE = str(Path(__file__).parent / "agents" / "fake_claude.py")
KINDS = ("function", "session", "tool_agent", "subprocess", "subprocess_tools", "chat")
MODES = ("timeout", "cannot_start", "unreadable", "crash")
TIMEOUT = 0.5


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


class Broken(Model):
    """A model provider that breaks the way `mode` says."""

    provider = "broken"

    def __init__(self, mode: str) -> None:
        super().__init__(mode)
        self.mode = mode

    async def generate(self, request: ModelRequest) -> ModelResponse:
        if self.mode == "timeout":
            await anyio.sleep(30)
        if self.mode == "cannot_start":
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        if self.mode == "unreadable":
            raise MalformedResponseError("the server answered with an HTML page")
        raise RuntimeError("the provider's SDK crashed")


async def in_a_task_group(job: Callable[[], Any]) -> None:
    """Run `job` in a task group, as agents with concurrency of their own do."""
    async with anyio.create_task_group() as group:
        group.start_soon(job)


def function_agent(mode: str) -> Callable[..., Any]:
    async def agent(prompt: str, ctx: TrialContext) -> Any:
        if mode == "timeout":  # its own deadline, inside its task group

            async def slow_call() -> None:
                with anyio.fail_after(0.05):
                    await anyio.sleep(30)

            await in_a_task_group(slow_call)
        if mode == "cannot_start":  # it delegates to a command-line agent that is not there
            session = await SubprocessAgent(["trialkit-no-such-agent"]).session(ctx)
            await in_a_task_group(lambda: session.send(prompt))
        if mode == "unreadable":
            return object()

        async def crash() -> None:
            raise RuntimeError("I will not do that")

        await in_a_task_group(crash)

    return agent


class Agent:
    """An agent class: one instance per trial, `send` per turn."""

    mode = ""

    async def send(self, message: str) -> Any:
        if self.mode == "timeout":
            await anyio.sleep(30)
        if self.mode == "unreadable":
            return {1, 2}
        raise ValueError("I will not do that")


def session_harness(mode: str) -> SessionHarness:
    if mode == "cannot_start":
        return SessionHarness(lambda: object(), name="no_send")  # made without send()
    return SessionHarness(type("Agent", (Agent,), {"mode": mode}))


def subprocess_agent(mode: str, tmp_path: Path, *, tools: bool) -> SubprocessAgent:
    served = [shout] if tools else []
    if mode == "cannot_start":
        return SubprocessAgent(["trialkit-no-such-agent"], tools=served)
    args = ["--output-format", "text"] if mode == "unreadable" else []
    return SubprocessAgent(
        [sys.executable, FAKE, *args],
        tools=served,
        output="json",
        timeout=TIMEOUT if mode == "timeout" else 30,
        env={"PIDS_FILE": str(tmp_path / "pids")},
    )


PROMPTS = {
    "timeout": "hang",
    "cannot_start": "say hi",
    "unreadable": "say hi",
    "crash": "crash oops",
}


@dataclass
class Case:
    harness: Any
    input: str = "Delete everything."
    options: dict[str, Any] | None = None


def make(kind: str, mode: str, tmp_path: Path) -> Case:
    if kind == "function":
        return Case(function_agent(mode))
    if kind == "session":
        return Case(session_harness(mode))
    if kind.startswith("subprocess"):
        agent = subprocess_agent(mode, tmp_path, tools=kind == "subprocess_tools")
        return Case(agent, PROMPTS[mode])
    # A model is the agent: one attempt per call, each cut at the timeout.
    retry = {"retry": RetryPolicy(attempts=1, timeout=TIMEOUT)}
    if kind == "tool_agent":
        return Case(ToolAgent(Broken(mode), [shout]), options=retry)
    return Case(ChatHarness(Broken(mode)), options=retry)


ERROR_TYPES = {
    ("function", "timeout"): "TimeoutError",
    ("function", "cannot_start"): "AgentStartError",
    ("function", "unreadable"): "AgentOutputError",
    ("session", "timeout"): "Timeout",
    ("session", "cannot_start"): "HarnessError",
    ("session", "unreadable"): "AgentOutputError",
    ("subprocess", "timeout"): "TimeoutError",
    ("subprocess", "cannot_start"): "AgentStartError",
    ("subprocess", "unreadable"): "AgentOutputError",
    ("function", "crash"): "RuntimeError",
    ("session", "crash"): "ValueError",
}
"""The error each broken harness leaves on its trial (with tools as without)."""

MESSAGES = {
    "timeout": ("did not finish the turn within", "timeout", "no answer within", "TimeoutError"),
    "cannot_start": ("cannot start the agent command", "no send() method", "Connection refused"),
    "unreadable": ("expected a JSON object", "expected a string", "HTML page"),
    "crash": ("will not do that", "SDK crashed"),
}


@pytest.mark.parametrize("expect", ["success", "failure"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_an_error_is_never_the_expected_failure(
    kind: str, mode: str, expect: str, tmp_path: Path
) -> None:
    case = make(kind, mode, tmp_path)
    # The session agent's timeout is the trial's; the others' come first, from within.
    limit = TIMEOUT if (kind, mode) == ("session", "timeout") else 30
    task = Task(id="t", input=case.input, expect=expect, timeout=limit)  # type: ignore[arg-type]
    report = run_sync(Suite(id="s", harness=case.harness, tasks=[task]), **(case.options or {}))
    (result,) = report.tasks[0].results

    agents_failure = mode == "crash" and kind not in ("tool_agent", "chat")
    if agents_failure and expect == "failure":
        assert result.verdict is Verdict.PASS, result
        assert result.failed and result.error is None
        (failed,) = result.scores  # agent_failed(), with the agent's failure as its reason
        assert failed.rationale is not None and "TaskGroup" not in failed.rationale
        assert any(text in failed.rationale for text in ("will not do that", "oops"))
        return
    if agents_failure and kind.startswith("subprocess"):  # a non-zero exit: a reported failure
        assert (result.verdict, result.status) == (Verdict.FAIL, TrialStatus.COMPLETED)
        return

    assert result.verdict is Verdict.ERROR, result
    assert result.status in (TrialStatus.ERROR, TrialStatus.TIMEOUT)
    assert result.error is not None
    assert result.error.type != "ExceptionGroup"
    assert "TaskGroup" not in result.error.message
    assert any(text in result.error.message for text in MESSAGES[mode]), result.error.message
    wanted = ERROR_TYPES.get((kind.removesuffix("_tools"), mode), "ModelError")
    assert result.error.type == wanted
    assert not result.failed  # nothing passed for the agent's own failure


def test_a_groups_real_error_is_the_message_and_the_failure() -> None:
    async def agent(prompt: str) -> str:
        async def refuse() -> None:
            raise PermissionError("refused: " + prompt)

        await in_a_task_group(refuse)
        return "done"

    report = run_sync(
        Suite(
            id="s",
            harness=agent,
            tasks=[
                Task(id="ok", input="x"),
                Task(id="refuse", input="y", expect="failure"),
            ],
        )
    )
    error = report.task("ok").results[0].error
    assert error is not None
    assert (error.type, error.message) == ("PermissionError", "refused: x")
    assert error.traceback is not None and "ExceptionGroup" in error.traceback  # all of it kept
    refused = report.task("refuse").results[0]
    assert refused.verdict is Verdict.PASS
    assert refused.scores[0].rationale == "PermissionError: refused: y"


def test_a_harness_error_anywhere_in_a_group_is_an_error() -> None:
    task = Task(id="t", input="x", expect="failure")

    def both(prompt: str) -> str:
        raise ExceptionGroup(
            "two", [PermissionError("refused"), ExceptionGroup("inner", [HarnessError("broke")])]
        )

    (result,) = run_sync(Suite(id="s", harness=both, tasks=[task])).tasks[0].results
    assert result.verdict is Verdict.ERROR and result.error is not None
    assert result.error.type == "HarnessError"
    assert result.error.message == "broke (and 1 other error: PermissionError: refused)"


def test_a_tools_give_up_inside_a_group_is_still_giving_up() -> None:
    from trialkit.harness import GiveUp
    from trialkit.models.scripted import ScriptedModel
    from trialkit.transcript import ToolCall

    async def give_up(reason: str) -> str:
        """Say it cannot be done."""

        async def no() -> None:
            raise GiveUp(reason)

        await in_a_task_group(no)
        return "done"

    model = ScriptedModel("m", [ToolCall(id="1", name="give_up", arguments={"reason": "no"})])
    task = Task(id="t", input="x", expect="failure")
    report = run_sync(Suite(id="s", harness=ToolAgent(model, [give_up]), tasks=[task]))
    (result,) = report.tasks[0].results
    assert result.verdict is Verdict.PASS and result.scores[0].rationale == "no"


def test_a_close_that_raises_a_group_is_noted_by_its_real_error() -> None:
    class Closing:
        def send(self, message: str) -> str:
            return "done"

        async def close(self) -> None:
            async def leak() -> None:
                raise OSError("the socket was gone")

            await in_a_task_group(leak)

    notes: list[str] = []

    def seen(ctx: Any) -> bool:
        notes.extend(m.content for m in ctx.transcript.messages if m.role == "system")
        return True

    task = Task(id="t", input="x", graders=[seen])
    (result,) = run_sync(Suite(id="s", harness=Closing, tasks=[task])).tasks[0].results
    assert result.verdict is Verdict.PASS  # a failing close does not hide the result
    assert notes == ["session.close() raised OSError: the socket was gone"]
