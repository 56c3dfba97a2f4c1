"""`openai/...`: OpenAI Chat Completions, or any server that speaks it, through the `openai` SDK.

```python
model = OpenAIModel("gpt-4o-mini")                                       # OPENAI_API_KEY
model = OpenAIModel("qwen2.5", base_url="http://127.0.0.1:8000/v1")      # vLLM, llama.cpp...
```

The SDK is imported when a model is made, not with this module, and its own retries are off:
trialkit retries transient errors itself (see `classify`). Requests go through the SDK's client
(`client.post`) with a body trialkit builds in wire form, and the answer is read from its JSON:
the SDK's parameter transforms and response objects would cost more CPU than the rest of a
trial's work, and trialkit would only convert them again.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Literal, cast

from trialkit.capture import wire
from trialkit.models._convert import (
    COUNT,
    PLACEHOLDER_API_KEY,
    TEXT,
    Classification,
    ListOf,
    MalformedResponseError,
    Obj,
    classify_status,
    malformed,
    missing_sdk,
    reading_answer,
    shape_problem,
)
from trialkit.models.base import (
    ErrorKind,
    ForceTool,
    Model,
    ModelRequest,
    ModelResponse,
    ResponseFormat,
    ToolChoice,
    ToolSpec,
)
from trialkit.secrets import register_client, register_secret
from trialkit.transcript import Message

if TYPE_CHECKING:
    import ssl

    from openai import AsyncOpenAI
    from openai.types.chat import (
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
        ChatCompletionToolChoiceOptionParam,
    )
    from openai.types.chat.completion_create_params import ResponseFormat as WireFormat

REQUESTS_PER_CLIENT = 8
"""In-flight requests one SDK client carries before the next client takes some. A client's
connection pool looks at each of its connections for every request, so at high concurrency
several small pools cost less CPU than one large one: against the fake server, pools of 8
instead of 32 halved the pool's work per request at 50 and 200 concurrent calls (3-5% of a
call's CPU). The connections are the same in number, only spread over more pools."""
MAX_CLIENTS = 32


class OpenAIModel(Model):
    """A model behind the OpenAI Chat Completions API.

    `base_url` (or `OPENAI_BASE_URL`) points at any compatible server; such a server gets a
    placeholder key when none is configured. `api_key` defaults to `OPENAI_API_KEY`. A `client`
    you pass in is used as it is, and stays yours to close.
    """

    provider = "openai"

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        client: AsyncOpenAI | None = None,
        schema_style: Literal["openai", "llama.cpp"] = "openai",
    ) -> None:
        """`schema_style="llama.cpp"` sends a JSON Schema the way llama.cpp's server takes it,
        `{"type": "json_object", "schema": ...}`, since it refuses OpenAI's `json_schema`."""
        super().__init__(name)
        self.schema_style = schema_style
        _import_sdk(self.id)
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.timeout = timeout
        self._api_key = api_key
        self._client = client
        register_secret(api_key)  # never stored, written or printed (trialkit.secrets)
        register_client(client)
        self._owns_client = client is None
        self._more: list[AsyncOpenAI] = []
        """Further clients for high concurrency, each with its own connection pool."""
        self._ssl: ssl.SSLContext | Literal[False] | None = None
        """The SSL context the clients share (`False`: none could be made)."""
        self._in_flight = [0]

    @property
    def supports_structured_output(self) -> bool:
        return True

    def unavailable(self, *, replaying: bool = False) -> str | None:
        if replaying or self._client is not None or self.base_url is not None:
            return None
        if self._api_key or os.environ.get("OPENAI_API_KEY"):
            return None
        return (
            f"{self.id}: no API key: set OPENAI_API_KEY (or OPENAI_BASE_URL to use a compatible "
            "server)"
        )

    @property
    def client(self) -> AsyncOpenAI:
        """The SDK client, made on first use (so a model can be named without a key)."""
        if self._client is None:
            self._client = self._new_client()
        return self._client

    def _new_client(self) -> AsyncOpenAI:
        api_key = self._api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and self.base_url is not None:
            api_key = PLACEHOLDER_API_KEY
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        context = self._ssl_context()
        return AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,
            http_client=None if context is None else DefaultAsyncHttpxClient(verify=context),
        )

    def _ssl_context(self) -> ssl.SSLContext | None:
        """One SSL context for every client this model makes: the SDK's HTTP library makes
        each client its own by default, reading the CA bundle again (about 17 ms, a ramp of 8
        clients at high concurrency). Made by that library, as it would make it; `None` (each
        client makes its own) when it cannot be found."""
        if self._ssl is None:
            from openai import DefaultAsyncHttpxClient

            for base in DefaultAsyncHttpxClient.__mro__:
                library = sys.modules.get(base.__module__.partition(".")[0])
                make = getattr(library, "create_ssl_context", None)
                if library is not None and library.__name__ != "openai" and callable(make):
                    self._ssl = make()
                    break
            else:
                self._ssl = False
        return self._ssl or None

    def _lease(self) -> int:
        """The client for the next request: the first with room, else a new one (up to
        `MAX_CLIENTS`), else the least busy. A client passed in is the only one."""
        index = next((i for i, n in enumerate(self._in_flight) if n < REQUESTS_PER_CLIENT), None)
        if index is None and self._owns_client and len(self._in_flight) < MAX_CLIENTS:
            self._more.append(self._new_client())
            self._in_flight.append(0)
            index = len(self._in_flight) - 1
        if index is None:
            index = min(range(len(self._in_flight)), key=self._in_flight.__getitem__)
        self._in_flight[index] += 1
        return index

    def _client_at(self, index: int) -> AsyncOpenAI:
        return self.client if index == 0 else self._more[index - 1]

    async def generate(self, request: ModelRequest) -> ModelResponse:
        body = _body(self.name, request, self.schema_style)
        leased = self._lease()
        try:
            # The SDK's own route for a body already in wire form: the same client, auth,
            # headers, timeout and errors as `chat.completions.create`, without its walk of
            # the parameters' types (no-op here, ~0.25 ms a call) and without building
            # response objects that only get read back into ours (~0.13 ms).
            content = await self._client_at(leased).post(
                "/chat/completions", body=body, cast_to=bytes
            )
        finally:
            self._in_flight[leased] -= 1
        try:
            completion: object = json.loads(content)
        except ValueError as exc:  # not JSON (a proxy's HTML page), or not UTF-8
            raise malformed(self.id, _API, "it is not valid JSON") from exc
        return _response(self.id, completion)

    def classify(self, exc: BaseException) -> Classification:
        from openai import APIConnectionError, APIStatusError

        if isinstance(exc, APIStatusError):
            if exc.status_code == 429 and exc.code == "insufficient_quota":
                return ErrorKind.PERMANENT, None, 429  # out of credit: waiting will not help
            return classify_status(exc.status_code, exc.response.headers)
        if isinstance(exc, APIConnectionError | MalformedResponseError):
            return ErrorKind.TRANSIENT, None, None  # includes APITimeoutError
        return super().classify(exc)

    async def aclose(self) -> None:
        more, self._more, self._in_flight = self._more, [], [0]
        for client in more:
            await client.close()
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.close()


def _import_sdk(model_id: str) -> None:
    try:
        import openai  # noqa: F401
    except ImportError as exc:
        raise missing_sdk(model_id, "OpenAI", "openai") from exc


# --- request ------------------------------------------------------------------------------


def _body(name: str, request: ModelRequest, style: str) -> dict[str, Any]:
    """The JSON body of a chat completion request: what the SDK's `create` sends for the
    same arguments, with what is not set left out."""
    config = request.config
    body: dict[str, Any] = {"model": name, "messages": _messages(request.messages)}
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
        tool_choice = _tool_choice(request.tool_choice)
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
    for field, value in (
        ("temperature", config.temperature),
        ("max_tokens", config.max_tokens),
        ("top_p", config.top_p),
        ("stop", config.stop),
        ("seed", config.seed),
    ):
        if value is not None:
            body[field] = value
    response_format = _response_format(request.response_format, style)
    if response_format is not None:
        body["response_format"] = response_format
    if config.extra:
        body.update(config.extra)  # as the SDK's `extra_body`: the extra values win
    return body


def _messages(messages: list[Message]) -> list[ChatCompletionMessageParam]:
    return [_message(message) for message in messages]


def _message(message: Message) -> ChatCompletionMessageParam:
    if message.role == "system":
        return {"role": "system", "content": message.content}
    if message.role == "user":
        return {"role": "user", "content": message.content}
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        return {"role": "tool", "content": message.content, "tool_call_id": message.tool_call_id}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in message.tool_calls
    ]
    # A string even when empty: llama.cpp's server refuses null here, OpenAI takes both.
    return {"role": "assistant", "content": message.content, "tool_calls": calls}


def _tool(spec: ToolSpec) -> ChatCompletionFunctionToolParam:
    tool: ChatCompletionFunctionToolParam = {
        "type": "function",
        "function": {"name": spec.name, "parameters": spec.parameters},
    }
    if spec.description:
        tool["function"]["description"] = spec.description
    return tool


def _tool_choice(choice: ToolChoice | None) -> ChatCompletionToolChoiceOptionParam | None:
    if isinstance(choice, ForceTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _response_format(response_format: ResponseFormat | None, style: str) -> WireFormat | None:
    if response_format is None:
        return None
    kind: Literal["text", "json_object", "json_schema"] = response_format.type
    if kind == "text":
        return {"type": "text"}
    if kind == "json_object" or response_format.json_schema is None:
        return {"type": "json_object"}
    if style == "llama.cpp":
        return cast("WireFormat", {"type": "json_object", "schema": response_format.json_schema})
    return {
        "type": "json_schema",
        "json_schema": {
            "name": response_format.name,
            "schema": response_format.json_schema,
            "strict": True,
        },
    }


# --- response -----------------------------------------------------------------------------


_TOOL_CALL = Obj({"id": TEXT, "type": TEXT})
_CALLS = {
    "function": Obj({"function": Obj({"name": (str,), "arguments": TEXT})}),
    "custom": Obj({"custom": Obj({"name": (str,), "input": TEXT})}),
}
"""What each kind of tool call holds (the SDK reads any other `type` as a function call)."""
_TOKEN_DETAILS = {"cached_tokens": COUNT, "cache_write_tokens": COUNT, "reasoning_tokens": COUNT}
_COMPLETION = Obj(
    {
        "choices": ListOf(
            Obj(
                {
                    "message": Obj(
                        {
                            "content": TEXT,
                            "refusal": TEXT,
                            "tool_calls": ListOf(_TOOL_CALL, nullable=True),
                        }
                    ),
                    "finish_reason": TEXT,
                }
            ),
            non_empty=True,
        ),
        "usage": Obj(
            {
                "prompt_tokens": COUNT,
                "completion_tokens": COUNT,
                "prompt_tokens_details": Obj(_TOKEN_DETAILS, nullable=True),
                "completion_tokens_details": Obj(_TOKEN_DETAILS, nullable=True),
            },
            nullable=True,
        ),
        "model": TEXT,
        "id": TEXT,
    }
)
"""What `_response` reads of a chat completion, as the API documents it."""
_API = "an OpenAI chat completion"


def _response(model_id: str, completion: object) -> ModelResponse:
    """Our answer from the body's JSON, checked first against the shape of what is read, then
    read as a captured chat completion is (`trialkit.capture.wire`)."""
    problem = shape_problem(completion, _COMPLETION)
    if problem is None and isinstance(completion, dict):
        message = completion["choices"][0]["message"]
        for index, call in enumerate(message.get("tool_calls") or []):
            shape = _CALLS["custom" if call.get("type") == "custom" else "function"]
            where = f"choices[0].message.tool_calls[{index}]"
            problem = problem or shape_problem(call, shape, where)
    if problem is not None:
        raise malformed(model_id, _API, problem)
    with reading_answer(model_id, _API):
        return wire.parse_json("chat", completion)
