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


class SandboxRecord(Record):
    """Which sandbox ran a trial, and what it allowed (`trialkit.sandbox.base.SandboxInfo`)."""

    provider: str
    """The provider's name: `bwrap`, `docker`, `podman`, `local` (no isolation)."""
    isolated: bool
    """Whether the provider isolates (false for `local`)."""
    network: str
    """The network while the agent ran: `none`, `model-only`, `allowlist`, `host`."""
    grader_network: str
    """The network while graders ran commands in it."""
    limits: dict[str, int | float] = Field(default_factory=dict)
    """The limits set, by their `Limits` field (`memory_bytes`, `processes`, ...)."""
    image: str | None = None
    """The image it ran (container providers)."""
    details: dict[str, str] = Field(default_factory=dict)
    """Provider facts (`cgroup: v1`, the container's engine and user)."""
    limit_hit: str | None = None
    """The limit a command of the trial hit (`memory`, `processes`, `cpu_time`, `wall_clock`,
    `output`, `disk`), which made the trial an error; `None` when none was."""

    def summary(self) -> str:
        """One line: `bwrap (isolated), network model-only / graders none, limits ...`."""
        kind = "isolated" if self.isolated else "no isolation"
        line = f"{self.provider} ({kind}), network {self.network} / graders {self.grader_network}"
        if self.image:
            line += f", image {self.image}"
        if self.limits:
            line += ", limits " + " ".join(f"{k}={v}" for k, v in sorted(self.limits.items()))
        if self.limit_hit:
            line += f"; hit: {self.limit_hit}"
        return line


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
    sandbox: SandboxRecord | None = None
    """The sandbox the trial's processes ran in; `None` when nothing of it ran in one."""
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
