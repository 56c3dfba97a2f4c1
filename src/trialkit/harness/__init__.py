"""Harnesses: adapters from a task to the agent under test."""

from trialkit.harness.base import Harness, HarnessLike, Reply, Session, TrialContext
from trialkit.harness.chat import ChatHarness
from trialkit.harness.function import FunctionHarness, SessionHarness, as_harness, recorded

__all__ = [
    "ChatHarness",
    "FunctionHarness",
    "Harness",
    "HarnessLike",
    "Reply",
    "Session",
    "SessionHarness",
    "TrialContext",
    "as_harness",
    "recorded",
]
