"""A trial: one attempt at one task, with everything that was recorded and decided about it."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import AwareDatetime, Field

from trialkit._record import ErrorInfo, Record
from trialkit.outcome import Outcome
from trialkit.score import Score, Verdict
from trialkit.transcript import Transcript, Usage

TRIAL_SCHEMA_VERSION = 1


class TrialStatus(StrEnum):
    """How the trial's run ended, before any grading."""

    COMPLETED = "completed"
    """The agent finished (possibly reporting failure); graders ran."""
    ERROR = "error"
    """Setup, the agent, or capture raised; no verdict was possible."""
    TIMEOUT = "timeout"
    """The task's timeout ran out."""


class Trial(Record):
    """One attempt at one task."""

    schema_version: int = TRIAL_SCHEMA_VERSION
    run_id: str
    task_id: str
    index: int
    """0-based trial number within the task."""
    status: TrialStatus
    verdict: Verdict
    expect: Literal["success", "failure"] = "success"
    model: str | None = None
    """The model under test, when the harness is a model."""
    transcript: Transcript = Field(default_factory=Transcript)
    outcome: Outcome = Field(default_factory=Outcome)
    scores: list[Score] = Field(default_factory=list)
    error: ErrorInfo | None = None
    """Why the trial errored (setup, agent, capture or timeout); graders' errors are on scores."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens of the agent's model calls."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Tokens of the graders' model calls (judges)."""
    cost_usd: float | None = None
    """Cost of all model calls, the agent's and the graders', plus what the agent reported its
    own calls cost (`Turn.cost_usd`); `None` when no call was recorded and no cost reported,
    or a price is unknown (never guessed as 0)."""
    grader_cost_usd: float | None = None
    """The graders' part of `cost_usd`: 0 when the graders called no model, `None` when a
    price is unknown."""
    attempt: int = 1
    """Which attempt this is: 1, or 2 and more for a trial run again after an error
    (`trialkit run --resume RUN --retry-errors`; the run's `config.retried` lists them)."""
    started_at: AwareDatetime
    duration_s: float
    """Wall time of setup, agent, capture and grading."""

    @property
    def label(self) -> str:
        """`TASK#N`, the way the CLI names a trial."""
        return f"{self.task_id}#{self.index}"
