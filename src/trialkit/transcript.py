"""What happened during a trial, recorded by trialkit rather than reported by the agent.

The runner opens a `TranscriptRecorder` for each trial and makes it the *current* one through a
context variable, so code running inside the trial (the model layer, tools, user code) can add
to it with `current_recorder()` without anybody passing it around.
"""

from __future__ import annotations

import re
import threading
import time
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, Field

from trialkit._record import Record

TRANSCRIPT_SCHEMA_VERSION = 1

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(Record):
    """A tool call and, once it came back, its result: the pair lives in one record."""

    id: str
    """The call id the model gave (or one trialkit made up when it gave none)."""
    name: str
    """The tool's name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The parsed arguments."""
    result: str | None = None
    """What the tool returned, as text; `None` when no result was seen."""
    is_error: bool = False
    """Whether the result is an error (the tool raised or reported failure)."""
    turn: int = 0
    """The user turn during which the call happened."""
    started_at: float | None = None
    """Seconds since the trial started, when known."""
    duration_s: float | None = None
    """How long the tool ran, when known."""


class Message(Record):
    """One chat message."""

    role: Role
    """Who speaks: `system`, `user`, `assistant` or `tool` (a tool result)."""
    content: str = ""
    """The text of the message."""
    name: str | None = None
    """The tool name, for a `tool` message."""
    tool_call_id: str | None = None
    """For a `tool` message: the id of the call it answers."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """For an `assistant` message: the tool calls it made."""


class Reasoning(Record):
    """A reasoning (thinking) event the model exposed."""

    content: str
    turn: int = 0
    redacted: bool = False
    """True when the provider returned only an opaque or redacted form."""


class Usage(Record):
    """Token counts, with OpenTelemetry semantics: `input_tokens` includes cached tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    def is_empty(self) -> bool:
        """No tokens at all (field by field: pydantic's `==` costs ten times as much)."""
        return not (
            self.input_tokens
            or self.output_tokens
            or self.cache_read_tokens
            or self.cache_write_tokens
            or self.reasoning_tokens
        )


class ModelCall(Record):
    """One call to a model made inside the trial (filled in by the model layer)."""

    model: str
    """The model id, e.g. `openai/gpt-4o-mini`."""
    role: Literal["agent", "grader"] = "agent"
    """Who made the call: the agent under test or a grader (a judge)."""
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    latency_s: float | None = None
    retries: int = 0
    """Attempts beyond the first (transient errors that were retried)."""
    error: str | None = None
    """Why the call failed for good, when it did."""
    replayed: bool = False
    """Answered from a cassette, without calling the model."""
    key: str | None = None
    """The request's cassette key (SHA-256 of its canonical JSON)."""
    turn: int = 0
    endpoint: str | None = None
    """For a call the agent made with its own SDK client, captured at the HTTP client: the
    method and URL it went to (`POST http://127.0.0.1:8000/v1/chat/completions`, no query);
    `None` for a call made through trialkit's model layer."""
    status: int | None = None
    """The HTTP status of the answer, for a captured call."""


class Turn(Record):
    """One user turn and the agent's answer to it."""

    index: int
    input: str | list[Message]
    """What the user sent in this turn."""
    output: str | None = None
    """What the agent answered."""
    is_error: bool = False
    """Whether the agent reported failure for this turn."""
    started_at: float = 0.0
    """Seconds since the trial started."""
    duration_s: float = 0.0
    cost_usd: float | None = None
    """What the agent reported its own model calls cost in this turn (`Reply.cost_usd`), for
    agents whose calls do not go through trialkit's model layer; `None` when it reported none."""
    reported_usage: Usage | None = None
    """What the agent said its own model calls used in this turn, when those calls were
    captured (a command-line agent through the model proxy): kept for comparison, never
    counted; the trial's usage comes from the captured calls."""
    reported_cost_usd: float | None = None
    """What the agent said this turn cost, beside the captured calls' price (not counted)."""
    probes: dict[str, Any] = Field(default_factory=dict)
    """What each of the task's probes answered right after this turn (as JSON values)."""
    probe_errors: dict[str, str] = Field(default_factory=dict)
    """Probes that raised after this turn: name → the error."""


class Timing(Record):
    """Wall-clock timing of the phases of a trial, in seconds."""

    started_at: AwareDatetime | None = None
    setup_s: float = 0.0
    agent_s: float = 0.0
    capture_s: float = 0.0
    grading_s: float = 0.0
    total_s: float = 0.0


class Transcript(Record):
    """Everything recorded during one trial."""

    schema_version: int = TRANSCRIPT_SCHEMA_VERSION
    messages: list[Message] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    reasoning: list[Reasoning] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    model_calls: list[ModelCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    """Usage of the agent's model calls (graders' calls are counted apart)."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Usage of model calls made by graders (judges)."""
    timing: Timing = Field(default_factory=Timing)

    def tool_call(self, call_id: str) -> ToolCall | None:
        """The tool call with this id, if there is one."""
        return next((call for call in self.tool_calls if call.id == call_id), None)

    def calls_to(self, name: str) -> list[ToolCall]:
        """Every call of the tool named `name`, in order."""
        return [call for call in self.tool_calls if call.name == name]


class TranscriptRecorder:
    """Collects the transcript of the trial that is running in the current context."""

    def __init__(self, task_id: str = "", trial_index: int = 0) -> None:
        self.transcript = Transcript(timing=Timing(started_at=datetime.now(UTC)))
        self._clock_start = time.perf_counter()
        self.turn = 0
        self.task_id = task_id
        self.trial_index = trial_index
        self._occurrences: dict[str, int] = {}
        self._free: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        """Model calls may be recorded from the agent's own threads as well as the loop."""
        self.substitutions: list[tuple[str, str]] = []
        """(this trial's value, placeholder) pairs, e.g. the workspace path: written as the
        placeholder in cassette keys and recordings, and put back in replayed answers, so a
        replay in another folder still matches."""
        self.volatile: list[tuple[re.Pattern[str], str]] = []
        """(pattern, stand-in) pairs: text in requests that changes from run to run without
        changing the answer (a tool's wall time), written as the stand-in in cassette keys."""
        self.fatal: BaseException | None = None
        """What must end the trial as an error even if the agent carried on: a replay miss, a
        request `--offline` refused, a grader's model call that got no usable answer. SDKs turn
        an exception under their `send` into a bare "Connection error.", and agents may catch
        that."""
        self.faults: list[BaseException] = []
        """The agent's captured model calls that got no usable answer (an error status, a
        broken body or stream: `trialkit.capture.faults.ModelFault`), in order. The trial is
        an error for the first one unless its task allows model faults."""
        self.closed = False
        """Set when the trial ends: threads the trial started are no longer attributed to it."""
        self.held_attempts: dict[str, list[Any]] = {}
        """Captured attempts that failed in a way SDKs retry, per request key, waiting for
        the retry that will carry their count (`trialkit.capture.calls`)."""

    def next_occurrence(self, key: str) -> int:
        """How many times this trial already made the request `key` (0 the first time).

        Cassettes file each response under (trial index, occurrence), so an agent that sends
        the same request twice in a trial gets its two recorded answers back in order. An
        occurrence given back by `release_occurrence` (a retried attempt) is handed out again.
        """
        with self._lock:
            free = self._free.get(key)
            if free:
                first = min(free)
                free.remove(first)
                return first
            count = self._occurrences.get(key, 0)
            self._occurrences[key] = count + 1
            return count

    def release_occurrence(self, key: str, occurrence: int) -> None:
        """Give an occurrence back: its attempt failed and will be retried under it."""
        with self._lock:
            self._free.setdefault(key, []).append(occurrence)

    def fail(self, exc: BaseException) -> None:
        """Note what must make the trial an error (the first such thing wins)."""
        with self._lock:
            if self.fatal is None:
                self.fatal = exc

    def fault(self, exc: BaseException) -> None:
        """Note a model call of the agent's that got no usable answer (see `faults`)."""
        with self._lock:
            self.faults.append(exc)

    def elapsed(self) -> float:
        return time.perf_counter() - self._clock_start

    def add_message(self, message: Message) -> None:
        self.transcript.messages.append(message)

    def add_tool_call(self, call: ToolCall) -> None:
        if call.turn == 0:
            call.turn = self.turn
        self.transcript.tool_calls.append(call)

    def add_tool_result(self, call_id: str, result: str, *, is_error: bool = False) -> None:
        """Pair a tool result with the call it answers (by id)."""
        call = self.transcript.tool_call(call_id)
        if call is None:
            raise KeyError(f"no tool call with id {call_id!r} in this transcript")
        call.result = result
        call.is_error = is_error

    def add_reasoning(self, content: str, *, redacted: bool = False) -> None:
        self.transcript.reasoning.append(
            Reasoning(content=content, turn=self.turn, redacted=redacted)
        )

    def add_model_call(self, call: ModelCall) -> None:
        with self._lock:
            call.turn = self.turn
            self.transcript.model_calls.append(call)
            if call.role == "grader":
                self.transcript.grader_usage = self.transcript.grader_usage + call.usage
            else:
                self.transcript.usage = self.transcript.usage + call.usage

    def add_usage(self, usage: Usage) -> None:
        """Count usage the agent reported itself (when no model call was recorded for it)."""
        self.transcript.usage = self.transcript.usage + usage


_current: ContextVar[TranscriptRecorder | None] = ContextVar("trialkit_recorder", default=None)


def current_recorder() -> TranscriptRecorder | None:
    """The recorder of the trial running in this context, or `None` outside a trial."""
    return _current.get()


def context_recorder() -> TranscriptRecorder | Literal[False] | None:
    """Like `current_recorder`, but `False` when this context never had one set at all: a
    thread started on its own, rather than code that runs outside every trial."""
    return _current.get(False)


def mark_outside_trials() -> None:
    """Say, in this context and those copied from it, that code here is outside any trial
    (unless a trial's recorder is already current)."""
    if _current.get(False) is False:
        _current.set(None)


def activate(recorder: TranscriptRecorder | None) -> Token[TranscriptRecorder | None]:
    """Make `recorder` the current one; returns the token to restore the previous one."""
    return _current.set(recorder)


def deactivate(token: Token[TranscriptRecorder | None]) -> None:
    _current.reset(token)
