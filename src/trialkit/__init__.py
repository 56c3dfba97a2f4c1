"""trialkit: outcome-first evaluation of LLM prompts and agents.

This module re-exports the public nouns of the design; a test pins the list.

Each name is imported from its module on first use, so that `import trialkit`, and so every
`trialkit` command, does not pay for the whole library (pydantic records, the runner, every
grader and harness) up front. Type checkers read the imports under `TYPE_CHECKING`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialkit import _moved
from trialkit._lazy import lazy_exports
from trialkit._version import __version__

if TYPE_CHECKING:
    import trialkit.graders as graders
    from trialkit._record import ErrorInfo as ErrorInfo
    from trialkit.environments.base import Environment as Environment
    from trialkit.graders.base import GradeContext as GradeContext
    from trialkit.graders.base import Grader as Grader
    from trialkit.graders.base import grader as grader
    from trialkit.harness.base import Harness as Harness
    from trialkit.harness.base import Reply as Reply
    from trialkit.harness.base import Session as Session
    from trialkit.harness.base import TrialContext as TrialContext
    from trialkit.outcome import Artifact as Artifact
    from trialkit.outcome import FileChange as FileChange
    from trialkit.outcome import Outcome as Outcome
    from trialkit.outcome import WorkspaceDiff as WorkspaceDiff
    from trialkit.report import Report as Report
    from trialkit.run.runner import Runner as Runner
    from trialkit.run.runner import run_sync as run_sync
    from trialkit.score import Assertion as Assertion
    from trialkit.score import Score as Score
    from trialkit.score import Verdict as Verdict
    from trialkit.task import Suite as Suite
    from trialkit.task import SuiteError as SuiteError
    from trialkit.task import SuiteKind as SuiteKind
    from trialkit.task import Task as Task
    from trialkit.task import Turns as Turns
    from trialkit.transcript import Message as Message
    from trialkit.transcript import ModelCall as ModelCall
    from trialkit.transcript import ToolCall as ToolCall
    from trialkit.transcript import Transcript as Transcript
    from trialkit.transcript import Usage as Usage
    from trialkit.transcript import current_recorder as current_recorder
    from trialkit.trial import Trial as Trial
    from trialkit.trial import TrialStatus as TrialStatus

# Where each name of __all__ comes from; keep it in step with the imports above.
_ORIGINS = {
    "graders": "trialkit.graders",
    "ErrorInfo": "trialkit._record",
    "Environment": "trialkit.environments.base",
    "GradeContext": "trialkit.graders.base",
    "Grader": "trialkit.graders.base",
    "grader": "trialkit.graders.base",
    "Harness": "trialkit.harness.base",
    "Reply": "trialkit.harness.base",
    "Session": "trialkit.harness.base",
    "TrialContext": "trialkit.harness.base",
    "Artifact": "trialkit.outcome",
    "FileChange": "trialkit.outcome",
    "Outcome": "trialkit.outcome",
    "WorkspaceDiff": "trialkit.outcome",
    "Report": "trialkit.report",
    "Runner": "trialkit.run.runner",
    "run_sync": "trialkit.run.runner",
    "Assertion": "trialkit.score",
    "Score": "trialkit.score",
    "Verdict": "trialkit.score",
    "Suite": "trialkit.task",
    "SuiteError": "trialkit.task",
    "SuiteKind": "trialkit.task",
    "Task": "trialkit.task",
    "Turns": "trialkit.task",
    "Message": "trialkit.transcript",
    "ModelCall": "trialkit.transcript",
    "ToolCall": "trialkit.transcript",
    "Transcript": "trialkit.transcript",
    "Usage": "trialkit.transcript",
    "current_recorder": "trialkit.transcript",
    "Trial": "trialkit.trial",
    "TrialStatus": "trialkit.trial",
}

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


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all __getattr__
    __getattr__, __dir__ = lazy_exports(__name__, _ORIGINS)

_moved.install()
