"""`anthropic/...`: Claude through the Anthropic Messages API and the `anthropic` SDK.

```python
model = AnthropicModel("claude-sonnet-4-5")                               # ANTHROPIC_API_KEY
model = AnthropicModel("claude-sonnet-4-5", base_url="http://127.0.0.1:4000")  # a proxy
```

The SDK is imported when a model is made, not with this module, and its own retries are off:
trialkit retries transient errors itself (see `classify`).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, TypeVar

from trialkit.capture.wire import STOP_REASONS
from trialkit.models._convert import (
    COUNT,
    PLACEHOLDER_API_KEY,
    TEXT,
    Classification,
    ListOf,
    MalformedResponseError,
    Obj,
    classify_status,
    json_kind,
    malformed,
    missing_sdk,
    raw_body,
    reading_answer,
    shape_problem,
)
from trialkit.models.base import (
    ErrorKind,
    ForceTool,
    Model,
    ModelRequest,
    ModelResponse,
    ToolChoice,
    ToolSpec,
)
from trialkit.secrets import register_client, register_secret
from trialkit.transcript import Message, ToolCall, Usage

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic, Omit
    from anthropic.types import (
        ContentBlock,
        MessageParam,
        TextBlockParam,
        ToolChoiceParam,
        ToolParam,
        ToolResultBlockParam,
        ToolUseBlockParam,
    )
    from anthropic.types import Message as WireMessage
    from anthropic.types import Usage as WireUsage

T = TypeVar("T")

DEFAULT_MAX_TOKENS = 1024
"""The Messages API requires `max_tokens`; this is sent when the request sets none."""
ANTHROPIC_KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Where the SDK finds credentials when none is passed (the second as a bearer token)."""


class AnthropicModel(Model):
    """A model behind the Anthropic Messages API.

    `base_url` (or `ANTHROPIC_BASE_URL`, without `/v1`) points at a proxy or a compatible
    server; such a server gets a placeholder key when none is configured. `api_key` defaults
    to `ANTHROPIC_API_KEY` (otherwise the SDK looks for its other credentials). A `client` you
    pass in is used as it is, and stays yours to close.

    What this API version does not take is left out of the request: `temperature` and `top_p`
    (the SDK 2.x sends API version 2026-10-21, which answers 400 to any sampling parameter),
    `seed`, and `response_format` (so `supports_structured_output` is False: ask for JSON in
    the prompt). System messages are joined into the `system` parameter.
    """

    provider = "anthropic"

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        client: AsyncAnthropic | None = None,
    ) -> None:
        super().__init__(name)
        _import_sdk(self.id)
        self.base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        self.timeout = timeout
        self._api_key = api_key
        self._client = client
        register_secret(api_key)  # never stored, written or printed (trialkit.secrets)
        register_client(client)
        self._owns_client = client is None

    @property
    def supports_structured_output(self) -> bool:
        return False

    def unavailable(self, *, replaying: bool = False) -> str | None:
        if replaying or self._client is not None or self.base_url is not None:
            return None
        if self._api_key or any(os.environ.get(v) for v in ANTHROPIC_KEY_VARIABLES):
            return None
        return (
            f"{self.id}: no API key: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL to use a "
            "compatible server)"
        )

    @property
    def client(self) -> AsyncAnthropic:
        """The SDK client, made on first use (so a model can be named without a key)."""
        if self._client is None:
            api_key = self._api_key or os.environ.get("ANTHROPIC_API_KEY") or None
            token = os.environ.get("ANTHROPIC_AUTH_TOKEN")  # the SDK sends it as a bearer token
            if api_key is None and token is None and self.base_url is not None:
                api_key = PLACEHOLDER_API_KEY
            from anthropic import AsyncAnthropic

            self._client = AsyncAnthropic(
                api_key=api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
        return self._client

    async def generate(self, request: ModelRequest) -> ModelResponse:
        from anthropic import omit
        from anthropic.types import Message as WireMessage

        config = request.config
        system, messages = _messages(request.messages)
        tools = [_tool(spec) for spec in request.tools]
        tool_choice = _tool_choice(request.tool_choice) if tools else None
        try:
            message: object = await self.client.messages.create(
                model=self.name,
                max_tokens=DEFAULT_MAX_TOKENS if config.max_tokens is None else config.max_tokens,
                messages=messages,
                system=system or omit,
                tools=tools or omit,
                tool_choice=_given(tool_choice, omit),
                stop_sequences=_given(config.stop, omit),
                extra_body=config.extra or None,
            )
        except json.JSONDecodeError as exc:
            raise malformed(self.id, _API, "it is not valid JSON") from exc
        if not isinstance(message, WireMessage):  # the SDK gives a list or text as is
            raise malformed(self.id, _API, f"the body is {json_kind(message)}")
        return _response(self.id, message)

    def classify(self, exc: BaseException) -> Classification:
        from anthropic import APIConnectionError, APIStatusError

        if isinstance(exc, APIStatusError):
            return classify_status(exc.status_code, exc.response.headers)  # 529: overloaded
        if isinstance(exc, APIConnectionError | MalformedResponseError):
            return ErrorKind.TRANSIENT, None, None  # includes APITimeoutError
        return super().classify(exc)

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.close()


def _import_sdk(model_id: str) -> None:
    try:
        import anthropic  # noqa: F401
    except ImportError as exc:
        raise missing_sdk(model_id, "Anthropic", "anthropic") from exc


def _given(value: T | None, omit: Omit) -> T | Omit:
    return omit if value is None else value


# --- request ------------------------------------------------------------------------------


def _messages(messages: list[Message]) -> tuple[str, list[MessageParam]]:
    """(the system prompt, the conversation): tool results go back in user messages, and a run
    of them shares one user message, as the API wants."""
    system: list[str] = []
    wire: list[MessageParam] = []
    calls: dict[str, ToolCall] = {}
    results: list[ToolResultBlockParam] | None = None
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        if message.role == "tool":
            if results is None:
                results = []
                wire.append({"role": "user", "content": results})
            results.append(_tool_result(message, calls))
            continue
        results = None
        if message.role == "user":
            wire.append({"role": "user", "content": message.content})
        elif not message.tool_calls:
            wire.append({"role": "assistant", "content": message.content})
        else:
            blocks: list[TextBlockParam | ToolUseBlockParam] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                calls[call.id] = call
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            wire.append({"role": "assistant", "content": blocks})
    return "\n\n".join(system), wire


def _tool_result(message: Message, calls: dict[str, ToolCall]) -> ToolResultBlockParam:
    if message.tool_call_id is None:
        raise ValueError("a tool message needs the tool_call_id of the call it answers")
    block: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": message.content,
    }
    call = calls.get(message.tool_call_id)
    if call is not None and call.is_error:
        block["is_error"] = True
    return block


def _tool(spec: ToolSpec) -> ToolParam:
    tool: ToolParam = {"name": spec.name, "input_schema": spec.parameters}
    if spec.description:
        tool["description"] = spec.description
    return tool


def _tool_choice(choice: ToolChoice | None) -> ToolChoiceParam | None:
    if isinstance(choice, ForceTool):
        return {"type": "tool", "name": choice.name}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if choice == "auto":
        return {"type": "auto"}
    return None


# --- response -----------------------------------------------------------------------------


_BLOCK = Obj({"type": (str,)})
_BLOCKS: dict[str, Obj] = {
    "text": Obj({"text": (str,)}),
    "thinking": Obj({"thinking": (str,)}),
    "tool_use": Obj({"id": (str,), "name": (str,)}),
}
_MESSAGE = Obj(
    {
        "content": ListOf(_BLOCK),
        "stop_reason": TEXT,
        "usage": Obj(
            {
                "input_tokens": COUNT,
                "output_tokens": COUNT,
                "cache_read_input_tokens": COUNT,
                "cache_creation_input_tokens": COUNT,
                "output_tokens_details": Obj({"thinking_tokens": COUNT}, nullable=True),
            },
            nullable=True,
        ),
        "model": TEXT,
        "id": TEXT,
    }
)
"""What `_response` reads of a message, as the API documents it (and each block by type)."""
_API = "an Anthropic message"


def _response(model_id: str, message: WireMessage) -> ModelResponse:
    # The SDK does not validate what it got: a field the server left out is missing, not None.
    raw = raw_body(message)
    problem = shape_problem(raw, _MESSAGE)
    if problem is None and isinstance(raw, dict):
        for index, block in enumerate(raw.get("content") or []):
            shape = _BLOCKS.get(block["type"])
            if shape is not None and problem is None:
                problem = shape_problem(block, shape, f"content[{index}]")
    if problem is not None:
        raise malformed(model_id, _API, problem)
    with reading_answer(model_id, _API):
        return _read_message(message)


def _read_message(message: WireMessage) -> ModelResponse:
    blocks: list[ContentBlock] = message.content
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "thinking":
            reasoning.append(block.thinking)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=_input(block.input)))
    stop: str | None = getattr(message, "stop_reason", None)
    return ModelResponse(
        message=Message(role="assistant", content="".join(text), tool_calls=calls),
        finish_reason=STOP_REASONS.get(stop, stop) if stop else None,
        usage=_usage(getattr(message, "usage", None)),
        model=getattr(message, "model", None),
        id=getattr(message, "id", None),
        reasoning=reasoning,
    )


def _input(value: object) -> dict[str, Any]:
    if isinstance(value, dict):
        return {str(key): item for key, item in value.items()}
    return {"_raw": value if isinstance(value, str) else json.dumps(value)}


def _usage(usage: WireUsage | None) -> Usage:
    """OpenTelemetry semantics: Anthropic's `input_tokens` leaves out the cached tokens (read
    and written), so they are added back."""
    if usage is None:
        return Usage()
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    details = usage.output_tokens_details
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=(details.thinking_tokens or 0) if details else 0,
    )
