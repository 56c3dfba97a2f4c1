"""Harnesses: adapters from a task to the agent under test."""

from trialkit.harness.base import Harness, HarnessLike, Reply, Session, TrialContext
from trialkit.harness.function import FunctionHarness, SessionHarness, as_harness

__all__ = [
    "FunctionHarness",
    "Harness",
    "HarnessLike",
    "Reply",
    "Session",
    "SessionHarness",
    "TrialContext",
    "as_harness",
]
