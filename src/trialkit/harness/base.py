"""The adapter between a task and the agent under test.

A `Harness` opens one `Session` per trial; the runner sends each user turn of the task to it
with `send` and records the replies into the trial's transcript.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import Field

from trialkit._record import Record
from trialkit.transcript import Message, ToolCall, Usage

if TYPE_CHECKING:
    from trialkit.models.base import GenerationConfig, Model
    from trialkit.sandbox.base import Sandbox
    from trialkit.task import Task


class HarnessError(RuntimeError):
    """The harness could not run the agent (a command that cannot start, unreadable output, a
    tool server that failed): never the agent's own failure, so never the expected failure of
    an `expect="failure"` task."""


class Reply(Record):
    """What an agent answered to one user turn.

    A harness function may return a plain string instead; it becomes `Reply(output=...)`.
    """

    output: str | None = None
    """The answer, as text."""
    is_error: bool = False
    """The agent reports that it failed (e.g. a CLI agent's error result)."""
    error: str | None = None
    """The agent's failure message, when `is_error`."""
    messages: list[Message] = Field(default_factory=list)
    """Messages the agent exchanged internally during the turn (assistant steps, tool
    results), for the transcript. The final answer is added from `output` when the last of
    these is not already that assistant message."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls made during the turn, each with its result."""
    reasoning: list[str] = Field(default_factory=list)
    usage: Usage | None = None
    """Token usage, for agents whose model calls do not go through trialkit's model layer
    (those are recorded automatically; do not report them twice)."""
    cost_usd: float | None = Field(default=None, ge=0.0)
    """What the agent's own model calls cost in this turn, in US dollars, for agents whose
    calls do not go through trialkit's model layer (those are priced automatically; do not
    report them twice). Added to the trial's `cost_usd`; `None` adds nothing."""
    reported_usage: Usage | None = None
    """What the agent said its model calls used, when trialkit captured those calls itself:
    kept on the turn for comparison, never counted (the captured calls are)."""
    reported_cost_usd: float | None = Field(default=None, ge=0.0)
    """What the agent said the turn cost, when its calls were captured: kept, not counted."""
    state: dict[str, Any] = Field(default_factory=dict)
    """Facts about the world the agent wants graders to see (merged into the outcome)."""


@dataclass
class TrialContext:
    """What a harness knows about the trial it serves."""

    task: Task
    trial_index: int
    world: Any = None
    """What the environment's `setup` returned, e.g. a workspace; `None` without one."""
    run_id: str = ""
    model: str | Model | None = None
    """The model chosen for this task (task's, suite's or `--model`), if any."""
    system: str | None = None
    """The suite's system prompt, if any."""
    config: GenerationConfig | None = None
    """The suite's generation parameters (temperature, max_tokens, ...), if any."""
    sandbox: Sandbox | None = None
    """The trial's sandbox (`exec`, `read_file`, `write_file`, ...), shared with the graders:
    the one the run names, else the `local` provider's over the workspace (no isolation);
    `None` when the run names none and the trial has no workspace folder."""


class Session:
    """One trial's conversation with the agent. Subclasses implement `send`."""

    async def send(self, message: str | list[Message]) -> Reply:
        raise NotImplementedError

    async def close(self) -> None:
        """Release what the session holds; called once, after the last turn, even on errors."""


class Harness:
    """Opens a session per trial. Subclasses implement `session`."""

    name: str = "harness"

    async def session(self, ctx: TrialContext) -> Session:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the harness holds (connections, servers); called when the run ends."""


HarnessLike: TypeAlias = Harness | Callable[..., Any] | Callable[..., Awaitable[Any]] | type | str
"""A `Harness`; a function from the task input to an answer; a class whose instances have a
`send` method (one instance per trial); or a model id string."""
