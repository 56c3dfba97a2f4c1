"""`pip install 'trialkit[mcp]'` alone: Python tools served over MCP (`ToolServer`), called
by the official `mcp` client and by a command-line agent (`SubprocessAgent`), every call in
the trial's transcript."""

from __future__ import annotations

import sys

import pytest

from tests.installs.helpers import ROOT
from trialkit import GradeContext, Suite, Task, run_sync

INSTALL = "mcp"
FAKE_AGENT = str(ROOT / "tests" / "agents" / "fake_claude.py")


def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.anyio
async def test_a_tool_is_served_to_the_official_client() -> None:
    from mcp import Client

    from trialkit.harness.mcp import ToolServer

    async with ToolServer([add]) as server, Client(server.url) as client:
        listed = (await client.list_tools()).tools
        result = await client.call_tool("add", {"a": 2, "b": 3})
    assert [t.name for t in listed] == ["add"]
    assert [block.text for block in result.content] == ["5"]
    (call,) = server.calls
    assert (call.name, call.arguments, call.result, call.is_error) == (
        "add",
        {"a": 2, "b": 3},
        "5",
        False,
    )


def test_a_command_line_agent_calls_a_served_tool() -> None:
    from trialkit.harness.subprocess import SubprocessAgent

    def called_add(ctx: GradeContext) -> bool:
        return [(c.name, c.result) for c in ctx.transcript.tool_calls] == [("add", "7")]

    agent = SubprocessAgent([sys.executable, FAKE_AGENT, "--mcp-url", "{mcp_url}"], tools=[add])
    task = Task(id="sum", input='mcp add {"a": 3, "b": 4}', graders=[called_add])
    report = run_sync(Suite(id="tools", harness=agent, tasks=[task]))
    assert report.summary.pass_rate == 1.0, report.tasks[0].results[0]
