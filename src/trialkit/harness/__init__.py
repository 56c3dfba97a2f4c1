"""Harnesses: adapters from a task to the agent under test."""

from trialkit.harness.base import Harness, HarnessLike, Reply, Session, TrialContext
from trialkit.harness.chat import ChatHarness
from trialkit.harness.function import FunctionHarness, SessionHarness, as_harness, recorded
from trialkit.harness.tool_agent import ToolAgent
from trialkit.harness.tools import GiveUp, Tool, ToolArgumentsError, call_tool, tool_spec

__all__ = [
    "ChatHarness",
    "FunctionHarness",
    "GiveUp",
    "Harness",
    "HarnessLike",
    "Reply",
    "Session",
    "SessionHarness",
    "Tool",
    "ToolAgent",
    "ToolArgumentsError",
    "TrialContext",
    "as_harness",
    "call_tool",
    "recorded",
    "tool_spec",
]
