"""What the fake provider reads from requests and the JSON bodies it answers with.

Four endpoints, each found by the ending of the request's path (so `/run/abc/v1/messages` is
Anthropic Messages too): OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and
OpenAI Embeddings. The readers pull what a behaviour needs out of any of the three
conversation formats (the last user text, the tools offered, the tool results so far); the
renderers turn a `Reply` into the endpoint's non-streamed body. `provider_streams` renders the
same replies as server-sent events.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import struct
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tests.fakes.provider_server import Reply

Api = Literal["chat", "responses", "messages", "embeddings"]

ROUTES: dict[str, Api] = {
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
    "/v1/messages": "messages",
    "/v1/embeddings": "embeddings",
}

CREATED = 1_767_225_600
"""The `created` time of answers that must be a pure function of the request (2026-01-01)."""


def api_of(path: str) -> Api | None:
    """The endpoint a path (without its query) ends with, or None."""
    for ending, api in ROUTES.items():
        if path.endswith(ending):
            return api
    return None


def digest(*parts: Any) -> str:
    """A short stable hex digest of JSON-able values (ids that depend on the request only)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# --- reading requests ---------------------------------------------------------------------


def last_user_text(api: Api, request: dict[str, Any]) -> str:
    """The text of the conversation's last user message (tool results included, as text)."""
    if api == "responses" and isinstance(request.get("input"), str):
        return str(request["input"])
    messages = _dicts(request.get("input" if api == "responses" else "messages"))
    for message in reversed(messages):
        if message.get("role") == "user":
            return text_of(message.get("content"))
    return ""


def offered_tools(api: Api, request: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The function tools the request offers: (name, JSON schema of the arguments)."""
    offered = []
    for tool in _dicts(request.get("tools")):
        if api == "chat" and isinstance(tool.get("function"), dict):
            function = tool["function"]
            offered.append((str(function.get("name")), function.get("parameters") or {}))
        elif api == "responses" and tool.get("type") == "function":
            offered.append((str(tool.get("name")), tool.get("parameters") or {}))
        elif api == "messages" and "name" in tool:
            offered.append((str(tool["name"]), tool.get("input_schema") or {}))
    return offered


def tool_results(api: Api, request: dict[str, Any]) -> list[str]:
    """The text of every tool result in the conversation, oldest first."""
    if api == "chat":
        messages = _dicts(request.get("messages"))
        return [text_of(m.get("content")) for m in messages if m.get("role") == "tool"]
    if api == "responses":
        items = _dicts(request.get("input"))
        outputs = ("function_call_output", "custom_tool_call_output")
        return [text_of(i.get("output")) for i in items if i.get("type") in outputs]
    results = []
    for message in _dicts(request.get("messages")):
        if message.get("role") == "user" and isinstance(message.get("content"), list):
            blocks = _dicts(message["content"])
            results += [text_of(b.get("content")) for b in blocks if b.get("type") == "tool_result"]
    return results


def text_of(content: Any) -> str:
    """The text in a message's content: a string, or the text in a list of parts/blocks."""
    if isinstance(content, str):
        return content
    parts = []
    for part in _dicts(content):
        if part.get("type") in ("text", "input_text", "output_text"):
            parts.append(str(part.get("text", "")))
        elif part.get("type") == "tool_result":
            parts.append(text_of(part.get("content")))
    return "".join(parts)


def streamed(api: Api, request: dict[str, Any]) -> bool:
    return api != "embeddings" and request.get("stream") is True


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def count(value: Any) -> int:
    """A rough token count (1 per 4 characters of JSON), never zero."""
    if value is None:
        return 0
    return max(1, len(json.dumps(value)) // 4)


def prompt_tokens(api: Api, request: dict[str, Any]) -> int:
    if api == "responses":
        return count(request.get("input")) + count(request.get("instructions"))
    return count(request.get("messages")) + count(request.get("system"))


# --- non-streamed answers -----------------------------------------------------------------


def arguments_json(arguments: Any) -> str:
    """A tool call's arguments as the JSON string OpenAI sends (a string is sent verbatim)."""
    return arguments if isinstance(arguments, str) else json.dumps(dict(arguments))


def arguments_object(arguments: Any) -> Any:
    """A tool call's arguments as the object Anthropic sends (a string is parsed if it can be)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            return json.loads(arguments)
        return arguments
    return dict(arguments)


def chat_usage(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    prompt, completion = prompt_tokens("chat", request), count(reply.text) + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def chat_tool_calls(reply: Reply, ident: str) -> list[dict[str, Any]]:
    return [
        {
            "id": call.id or f"call_fake_{ident}_{index}",
            "type": "function",
            "function": {"name": call.name, "arguments": arguments_json(call.arguments)},
        }
        for index, call in enumerate(reply.tool_calls)
    ]


def chat_completion(
    reply: Reply, request: dict[str, Any], ident: str, created: int
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text or not reply.tool_calls else None,
        "refusal": None,
    }
    if reply.tool_calls:
        message["tool_calls"] = chat_tool_calls(reply, ident)
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    return {
        "id": f"chatcmpl-fake-{ident}",
        "object": "chat.completion",
        "created": created,
        "model": reply.model or request.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": chat_finish_reason(reply),
                "logprobs": None,
            }
        ],
        "usage": chat_usage(reply, request),
    }


def chat_finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def anthropic_blocks(reply: Reply, ident: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake"})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for index, call in enumerate(reply.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_fake_{ident}_{index}",
                "name": call.name,
                "input": arguments_object(call.arguments),
            }
        )
    return blocks


def anthropic_usage(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    return {
        "input_tokens": prompt_tokens("messages", request),
        "output_tokens": count(reply.text) + 1,
    }


def anthropic_message(reply: Reply, request: dict[str, Any], ident: str) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{ident}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.get("model", "fake"),
        "content": anthropic_blocks(reply, ident),
        "stop_reason": anthropic_stop_reason(reply),
        "stop_sequence": None,
        "usage": anthropic_usage(reply, request),
    }


def anthropic_stop_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn")


def response_output(reply: Reply, ident: str) -> list[dict[str, Any]]:
    """The output items of a Responses answer: reasoning, the message, the tool calls."""
    items: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        summary = [{"type": "summary_text", "text": reply.reasoning}]
        items.append({"type": "reasoning", "id": f"rs_fake_{ident}", "summary": summary})
    if reply.text or not reply.tool_calls:
        items.append(
            {
                "type": "message",
                "id": f"msg_fake_{ident}",
                "status": "completed",
                "role": "assistant",
                "content": [output_text_part(reply.text)],
            }
        )
    for index, call in enumerate(reply.tool_calls):
        call_id = call.id or f"call_fake_{ident}_{index}"
        if call.custom:
            items.append(
                {
                    "type": "custom_tool_call",
                    "id": f"ctc_fake_{ident}_{index}",
                    "call_id": call_id,
                    "name": call.name,
                    "input": arguments_json(call.arguments),
                    "status": "completed",
                }
            )
            continue
        items.append(
            {
                "type": "function_call",
                "id": f"fc_fake_{ident}_{index}",
                "call_id": call_id,
                "name": call.name,
                "arguments": arguments_json(call.arguments),
                "status": "completed",
            }
        )
    return items


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def response_usage(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    prompt, completion = prompt_tokens("responses", request), count(reply.text) + 1
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def response_object(
    reply: Reply, request: dict[str, Any], ident: str, created: int, *, in_progress: bool = False
) -> dict[str, Any]:
    """A Responses answer; `in_progress`: the snapshot with no output that a stream starts with."""
    return {
        "id": f"resp_fake_{ident}",
        "object": "response",
        "created_at": created,
        "status": "in_progress" if in_progress else "completed",
        "completed_at": None if in_progress else created,
        "model": reply.model or request.get("model", "fake"),
        "output": [] if in_progress else response_output(reply, ident),
        "usage": None if in_progress else response_usage(reply, request),
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "metadata": request.get("metadata") or {},
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "temperature": request.get("temperature", 1.0),
        "top_p": request.get("top_p", 1.0),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "text": request.get("text") or {"format": {"type": "text"}},
    }


def embeddings(request: dict[str, Any]) -> dict[str, Any]:
    """A vector per input, from a hash of the input (so the same text gets the same vector)."""
    inputs = request.get("input")
    # A list of token ids is one input; a list of strings (or of token lists) is several.
    if not isinstance(inputs, list) or all(isinstance(item, int) for item in inputs):
        inputs = [inputs]
    size = request.get("dimensions")
    size = size if isinstance(size, int) and 0 < size <= 4096 else 8
    data = []
    for index, item in enumerate(inputs):
        vector = _vector(item, size)
        encoded: Any = vector
        if request.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(count(item) for item in inputs)
    return {
        "object": "list",
        "data": data,
        "model": request.get("model", "fake"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _vector(item: Any, size: int) -> list[float]:
    raw = b"".join(hashlib.sha256(f"{block}:{item!r}".encode()).digest() for block in range(size))
    # Values in [-1, 1], exactly representable as float32 (so base64 decodes to the same list).
    return [(byte - 128) / 128 for byte in raw[:size]]


# --- errors -------------------------------------------------------------------------------


_OPENAI_ERROR_TYPES = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def openai_error(
    status: int, message: str, error_type: str | None, code: str | None
) -> dict[str, Any]:
    default_type, default_code = _OPENAI_ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": error_type or default_type,
            "param": None,
            "code": code or default_code,
        }
    }


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, message: str, error_type: str | None) -> dict[str, Any]:
    default_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": error_type or default_type, "message": message},
        "request_id": "req_fake",
    }
