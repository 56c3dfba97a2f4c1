"""Harnesses: adapters from a task to the agent under test."""

from trialkit.harness.base import (
    Harness,
    HarnessError,
    HarnessLike,
    Reply,
    Session,
    TrialContext,
)
from trialkit.harness.chat import ChatHarness
from trialkit.harness.function import FunctionHarness, SessionHarness, as_harness, recorded
from trialkit.harness.mcp import ToolServer, ToolServerError
from trialkit.harness.subprocess import AgentOutputError, AgentStartError, SubprocessAgent
from trialkit.harness.tool_agent import ToolAgent
from trialkit.harness.tools import GiveUp, Tool, ToolArgumentsError, call_tool, tool_spec

__all__ = [
    "AgentOutputError",
    "AgentStartError",
    "ChatHarness",
    "FunctionHarness",
    "GiveUp",
    "Harness",
    "HarnessError",
    "HarnessLike",
    "Reply",
    "Session",
    "SessionHarness",
    "SubprocessAgent",
    "Tool",
    "ToolAgent",
    "ToolArgumentsError",
    "ToolServer",
    "ToolServerError",
    "TrialContext",
    "as_harness",
    "call_tool",
    "recorded",
    "tool_spec",
]
