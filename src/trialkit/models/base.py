"""The model layer's contract: a request, a response, and a tiny provider ABC.

A provider implements one method, `generate(request) -> response`, plus a hook that says which
of its exceptions are worth retrying. Everything else — retries, limits, cassettes, usage, cost
and recording into the trial's transcript — is done once, around every provider, by
`trialkit.models.managed.ManagedModel`, which is what `get_model` returns.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from trialkit._record import Record
from trialkit.transcript import Message, ToolCall, Usage

REQUEST_SCHEMA_VERSION = 1


class ToolSpec(Record):
    """A tool the model may call, described by a JSON Schema for its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ForceTool(Record):
    """`tool_choice` that forces a call of the tool named `name`."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForceTool


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic would read true as 1
        raise PydanticCustomError("number_type", "Input should be a number")
    return value


_Float = Annotated[float, BeforeValidator(_not_bool)]
_Int = Annotated[int, BeforeValidator(_not_bool)]


class GenerationConfig(Record):
    """Sampling parameters; `None` leaves the provider's default."""

    temperature: _Float | None = None
    max_tokens: _Int | None = None
    top_p: _Float | None = None
    stop: list[str] | None = None
    seed: _Int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific parameters passed through as they are (part of the cassette key)."""


class ResponseFormat(Record):
    """Ask for JSON output, optionally matching a JSON Schema."""

    type: Literal["text", "json_object", "json_schema"] = "json_schema"
    name: str = "response"
    json_schema: dict[str, Any] | None = None


class ModelRequest(Record):
    """Everything that decides a model's answer; its canonical JSON is the cassette key."""

    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: ToolChoice | None = None
    config: GenerationConfig = Field(default_factory=GenerationConfig)
    response_format: ResponseFormat | None = None

    def canonical(self, model_id: str) -> dict[str, Any]:
        """The request as plain data, with the model id, in a stable form.

        Tool calls inside messages keep only what the model sees (id, name, arguments): a
        harness that echoes transcript tool calls back, with their timings, must still hit the
        same recording.
        """
        data = self.model_dump(
            mode="json",
            exclude_defaults=True,
            exclude={"messages": {"__all__": {"tool_calls": {"__all__": _CALL_RUNTIME}}}},
        )
        return {"schema_version": REQUEST_SCHEMA_VERSION, "model": model_id, **data}

    def key(self, model_id: str) -> str:
        """SHA-256 of the canonical JSON: what a cassette files this request under."""
        return key_of(self.canonical(model_id))


_CALL_RUNTIME = {"result", "is_error", "turn", "started_at", "duration_s"}


def key_of(canonical: object) -> str:
    """SHA-256 of compact, key-sorted JSON; lone surrogates are kept, never an error."""
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ModelResponse(Record):
    """A model's answer, normalised across providers."""

    message: Message
    """The assistant message, with its tool calls (arguments parsed, results empty)."""
    finish_reason: str | None = None
    """Normalised: `stop`, `length`, `tool_calls`, `content_filter`, or the provider's word."""
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    """The model name the provider says answered."""
    id: str | None = None
    """The provider's response id."""
    latency_s: float | None = None
    reasoning: list[str] = Field(default_factory=list)
    """Reasoning (thinking) text the provider exposed."""

    @property
    def text(self) -> str:
        return self.message.content

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls


class ErrorKind(StrEnum):
    TRANSIENT = "transient"
    """Worth retrying: 429, 5xx, timeouts, dropped connections."""
    PERMANENT = "permanent"
    """Retrying cannot help: 400, 401, 403, 404, 422, malformed requests."""


class ModelError(Exception):
    """A model call failed for good (after retries, or at once for a permanent error)."""

    def __init__(
        self,
        message: str,
        *,
        model: str,
        kind: ErrorKind = ErrorKind.PERMANENT,
        status: int | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.model = model
        self.kind = kind
        self.status = status
        self.attempts = attempts


class Model:
    """A provider. Subclasses implement `generate`; override the hooks where they differ."""

    provider: str = "custom"

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def id(self) -> str:
        """`provider/name`, the id a suite or `--model` uses."""
        return f"{self.provider}/{self.name}"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    def classify(self, exc: BaseException) -> tuple[ErrorKind, float | None, int | None]:
        """(kind, seconds the server asked us to wait, HTTP status) for an exception."""
        if isinstance(exc, TimeoutError | ConnectionError):
            return ErrorKind.TRANSIENT, None, None
        return ErrorKind.PERMANENT, None, None

    @property
    def supports_structured_output(self) -> bool:
        return False

    def unavailable(self, *, replaying: bool = False) -> str | None:
        """Why this model cannot be called here (a missing key, package or file), or `None`.

        Asked before a run starts, so that a run whose model cannot work stops at once with
        one line instead of erroring every trial. `replaying`: every call will come from a
        cassette, so what only a live call needs (a key, weights) is not asked for.
        """
        return None

    async def aclose(self) -> None:
        """Release connections; called when the run ends."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"
