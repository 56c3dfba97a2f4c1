"""trialkit: outcome-first evaluation of LLM prompts and agents.

This module re-exports the public nouns of the design; a test pins the list.
"""

from trialkit import graders
from trialkit._record import ErrorInfo
from trialkit._version import __version__
from trialkit.environments.base import Environment
from trialkit.graders.base import GradeContext, Grader, grader
from trialkit.harness.base import Harness, Reply, Session, TrialContext
from trialkit.outcome import Artifact, FileChange, Outcome, WorkspaceDiff
from trialkit.report import Report
from trialkit.runner import Runner, run_sync
from trialkit.score import Assertion, Score, Verdict
from trialkit.task import Suite, SuiteError, SuiteKind, Task, Turns
from trialkit.transcript import Message, ModelCall, ToolCall, Transcript, Usage, current_recorder
from trialkit.trial import Trial, TrialStatus

__all__ = [
    "Artifact",
    "Assertion",
    "Environment",
    "ErrorInfo",
    "FileChange",
    "GradeContext",
    "Grader",
    "Harness",
    "Message",
    "ModelCall",
    "Outcome",
    "Reply",
    "Report",
    "Runner",
    "Score",
    "Session",
    "Suite",
    "SuiteError",
    "SuiteKind",
    "Task",
    "ToolCall",
    "Transcript",
    "Trial",
    "TrialContext",
    "TrialStatus",
    "Turns",
    "Usage",
    "Verdict",
    "WorkspaceDiff",
    "__version__",
    "current_recorder",
    "grader",
    "graders",
    "run_sync",
]
