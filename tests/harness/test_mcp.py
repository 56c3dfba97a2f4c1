"""Python tools served over MCP: `ToolServer` with the official `mcp` client, and end to end
through `SubprocessAgent` with an agent process that calls them."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from trialkit import GradeContext, Suite, Task, TrialContext, graders, run_sync
from trialkit.environments.workspace import Workspace
from trialkit.harness.mcp import ToolServer
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.harness.tools import GiveUp, Tool
from trialkit.transcript import TranscriptRecorder, activate, deactivate

FAKE = str(Path(__file__).parents[1] / "agents" / "fake_claude.py")


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


def whoami(ctx: TrialContext, greeting: str) -> str:
    """Say which trial this is."""
    return f"{greeting} from {ctx.task.id}#{ctx.trial_index}"


def write_note(ctx: TrialContext, path: str, text: str) -> str:
    """Write a note in the workspace."""
    target = ctx.world.path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return f"saved {path}"


def read_note(ctx: TrialContext, path: str) -> str:
    """Read a note from the workspace."""
    return str((ctx.world.path / path).read_text())


def give_up(reason: str) -> str:
    """Say the task cannot be done."""
    raise GiveUp(reason)


async def slow() -> str:
    """Never finishes in time."""
    await anyio.sleep(60)
    return "late"


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


# -- the server with an in-process client -------------------------------------------------------


@pytest.mark.anyio
async def test_only_the_given_tools_with_their_schemas() -> None:
    async with ToolServer([add, Tool(whoami, name="who")]) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        async with Client(server.url) as client:
            listed = (await client.list_tools()).tools
    assert [(t.name, t.description) for t in listed] == [
        ("add", "Add two integers."),
        ("who", "Say which trial this is."),
    ]
    assert listed[0].input_schema == Tool(add).spec.parameters
    assert listed[1].input_schema["properties"] == {"greeting": {"type": "string"}}


@pytest.mark.anyio
async def test_calls_are_recorded_into_the_recorder_captured_at_construction() -> None:
    recorder = TranscriptRecorder("t", 0)
    token = activate(recorder)
    ctx = TrialContext(task=Task(id="t", input="go"), trial_index=3)
    server = ToolServer([add, whoami], ctx=ctx)
    deactivate(token)  # calls arrive in uvicorn's tasks, where no recorder is current
    recorder.turn = 2
    async with server, Client(server.url) as client:
        assert text_of(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
        assert text_of(await client.call_tool("whoami", {"greeting": "hi"})) == "hi from t#3"
    assert recorder.transcript.tool_calls == server.calls
    first, second = server.calls
    assert (first.name, first.arguments, first.result, first.is_error) == (
        "add",
        {"a": 2, "b": 3},
        "5",
        False,
    )
    assert first.id.startswith("mcp_") and first.id != second.id
    assert first.turn == 2
    assert first.started_at is not None and first.duration_s is not None
    assert second.started_at is not None and second.started_at >= first.started_at


@pytest.mark.anyio
async def test_bad_calls_come_back_as_error_results_and_are_recorded() -> None:
    async with ToolServer([add, fail]) as server, Client(server.url) as client:
        bad = await client.call_tool("add", {"a": "two"})
        raised = await client.call_tool("fail", {"reason": "disk full"})
        unknown = await client.call_tool("delete_everything", {})
        still_fine = await client.call_tool("add", {"a": 1})
    assert [r.is_error for r in (bad, raised, unknown, still_fine)] == [True, True, True, False]
    assert [(c.name, c.result, c.is_error) for c in server.calls] == [
        (
            "add",
            "invalid arguments for add: a: Input should be a valid integer, unable to parse "
            "string as an integer",
            True,
        ),
        ("fail", "RuntimeError: disk full", True),
        ("delete_everything", "no tool named 'delete_everything'; the tools are: add, fail", True),
        ("add", "1", False),
    ]
    assert text_of(bad) == server.calls[0].result


@pytest.mark.anyio
async def test_a_tool_that_gives_up_marks_the_turn_as_failed() -> None:
    async with ToolServer([give_up]) as server, Client(server.url) as client:
        answer = await client.call_tool("give_up", {"reason": "no such patient"})
    assert (text_of(answer), answer.is_error) == ("gave up: no such patient", False)
    assert server.gave_up == "no such patient"
    assert [(c.result, c.is_error) for c in server.calls] == [("gave up: no such patient", False)]


@pytest.mark.anyio
async def test_a_client_speaking_the_older_handshake_protocol() -> None:
    async with ToolServer([add]) as server, Client(server.url, mode="legacy") as client:
        assert text_of(await client.call_tool("add", {"a": 4, "b": 4})) == "8"
    assert [c.result for c in server.calls] == ["8"]


@pytest.mark.anyio
async def test_a_call_cut_short_still_shows() -> None:
    server = ToolServer([slow])
    async with server, Client(server.url) as client, anyio.create_task_group() as group:
        group.start_soon(client.call_tool, "slow", {})
        with anyio.fail_after(10):
            while not server.calls:  # noqa: ASYNC110 - waiting for the server's record
                await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    (call,) = server.calls
    assert call.is_error and call.result is not None and "cancelled" in call.result


async def serve_while(block: Any) -> None:
    async with ToolServer([add]):
        await block()


@pytest.mark.anyio
async def test_what_the_block_raises_comes_out_as_it_was_raised() -> None:
    # Not wrapped in an ExceptionGroup by the server's task group: a timeout stays a timeout.
    for raised in (TimeoutError("the turn took too long"), KeyError("x")):

        async def fail_with(error: BaseException = raised) -> None:
            raise error

        with pytest.raises(type(raised)) as caught:
            await serve_while(fail_with)
        assert caught.value is raised

    async def time_out() -> None:
        with anyio.fail_after(0.01):
            await anyio.sleep(5)

    with pytest.raises(TimeoutError):
        await serve_while(time_out)


@pytest.mark.anyio
async def test_the_server_stops_and_runs_once() -> None:
    server = ToolServer([add])
    async with server:
        port = server.port
        assert port is not None
    with pytest.raises(RuntimeError, match="not running"):
        server.url  # noqa: B018
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
    with pytest.raises(RuntimeError, match="runs once"):
        async with server:
            pass


def test_without_the_mcp_extra_the_error_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server.lowlevel", None)
    with pytest.raises(ImportError, match=r"pip install 'trialkit\[mcp\]'"):
        SubprocessAgent(["agent"], tools=[add])
    with pytest.raises(ImportError, match=r"pip install 'trialkit\[mcp\]'"):
        anyio.run(ToolServer([add]).__aenter__)


# -- end to end: an agent process calls the tools -----------------------------------------------


class Seen:
    def __init__(self) -> None:
        self.contexts: list[GradeContext] = []

    def __call__(self, ctx: GradeContext) -> bool:
        self.contexts.append(ctx)
        return True


def test_an_agent_calls_served_tools_in_its_workspace_and_graders_see_the_calls() -> None:
    seen = Seen()
    agent = SubprocessAgent(
        [sys.executable, FAKE, "--output-format", "stream-json", "--mcp-config", "{mcp_config}"],
        tools=[write_note, read_note],
    )
    script = "\n".join(
        [
            'mcp write_note {"path": "notes/a.md", "text": "sleep well"}',
            'mcp write_note {"path": 7}',
            "write b.txt built-in",
            'mcp read_note {"path": "notes/a.md"}',
            "env",
        ]
    )
    task = Task(
        id="notes",
        input=script,
        graders=[
            graders.tool_called("write_note", {"path": "notes/a.md"}),
            graders.tool_called("read_note", times=1),
            graders.tool_order("write_note", "Write", "read_note"),
            graders.file_exists("notes/a.md"),
            seen,
        ],
    )
    report = run_sync(
        Suite(id="s", harness=agent, environment=Workspace(keep="none"), tasks=[task])
    )
    assert report.tasks[0].verdict == "pass", report.tasks[0].results[0].scores

    (ctx,) = seen.contexts
    calls = ctx.transcript.tool_calls
    assert [(c.name, c.is_error) for c in calls] == [
        ("write_note", False),
        ("write_note", True),
        ("Write", False),
        ("read_note", False),
    ]
    assert calls[1].result == (
        "invalid arguments for write_note: path: Input should be a valid string; "
        "text: Field required"
    )
    assert calls[3].result == "sleep well"
    assert all(c.id.startswith("mcp_") for c in calls if c.name != "Write")
    # The agent reported its MCP calls too; only the server's record counts.
    assert ctx.transcript.calls_to("mcp__trialkit__write_note") == []
    assert {c.name for m in ctx.transcript.messages for c in m.tool_calls} >= {
        "mcp__trialkit__write_note"
    }

    # The MCP configuration lived outside the workspace, held only the URL, and is gone.
    told = json.loads(ctx.outcome.output or "")
    config_path = Path(told["argv"][told["argv"].index("--mcp-config") + 1])
    url = told["env"]["TRIALKIT_MCP_URL"]
    assert json.loads(told["mcp_config"]) == {
        "mcpServers": {"trialkit": {"type": "http", "url": url}}
    }
    assert not config_path.is_relative_to(ctx.world.path)
    assert not config_path.exists()
    assert ctx.outcome.diff is not None
    assert [f.path for f in ctx.outcome.diff.files] == ["b.txt", "notes/a.md"]


def test_an_agent_whose_tool_gives_up_has_failed_as_expected() -> None:
    agent = SubprocessAgent([sys.executable, FAKE, "--mcp-url", "{mcp_url}"], tools=[give_up])
    task = Task(id="refuse", input='mcp give_up {"reason": "unsafe"}', expect="failure")
    report = run_sync(Suite(id="s", harness=agent, tasks=[task]))
    (result,) = report.tasks[0].results
    assert (result.verdict, result.failed) == ("pass", True)


def test_each_trial_has_its_own_server_and_transcript() -> None:
    seen = Seen()
    agent = SubprocessAgent([sys.executable, FAKE], tools=[whoami])  # URL from the environment
    task = Task(id="who", input='mcp whoami {"greeting": "hello"}', trials=2, graders=[seen])
    run_sync(Suite(id="s", harness=agent, tasks=[task]), concurrency=2)
    answers = {}
    for ctx in seen.contexts:
        (call,) = ctx.transcript.tool_calls
        answers[ctx.trial_index] = (call.result, ctx.outcome.output)
    assert answers == {
        0: ("hello from who#0", "whoami: ok: hello from who#0"),
        1: ("hello from who#1", "whoami: ok: hello from who#1"),
    }
