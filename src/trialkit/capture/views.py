"""A captured call's request as trialkit's own calls look: messages and generation settings.

A call made through trialkit's model layer keeps its request as `{"messages": [...], "config":
{...}}`; a captured call keeps the body the agent sent, in its API's own shape. Exports and
screens read both through `request_view`, so a captured call shows its conversation too.
"""

from __future__ import annotations

import json
from typing import Any

from trialkit.capture import wire
from trialkit.transcript import ModelCall

Messages = list[dict[str, Any]]


def api_of(call: ModelCall) -> wire.Api | None:
    """The model API a captured call went to; `None` for a call of trialkit's model layer."""
    if call.endpoint is None:
        return None
    method, _, url = call.endpoint.partition(" ")
    path = "/" + url.split("://", 1)[-1].partition("/")[2]
    return wire.recognise(method, path)


def request_view(call: ModelCall) -> tuple[Messages, dict[str, Any]]:
    """(messages as `Message` dicts: role, content, tool_calls, tool_call_id; settings:
    temperature, max_tokens, top_p, stop, seed) of any model call."""
    request = call.request
    api = api_of(call)
    if api is None:
        messages = request.get("messages")
        config = request.get("config")
        return (
            [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else [],
            config if isinstance(config, dict) else {},
        )
    return _MESSAGES[api](request), _config(request)


def _config(body: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key in ("temperature", "top_p", "seed"):
        if key in body:
            config[key] = body[key]
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        if key in body:
            config["max_tokens"] = body[key]
            break
    stop = body.get("stop", body.get("stop_sequences"))
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list) and stop:
        config["stop"] = stop
    return config


def _text(content: Any) -> str:
    """Text of a content value: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"_raw": value}
        return parsed if isinstance(parsed, dict) else {"_raw": value}
    return {}


def _chat(body: dict[str, Any]) -> Messages:
    messages: Messages = []
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        role = "system" if role == "developer" else role
        if role not in ("system", "user", "assistant", "tool"):
            continue
        item: dict[str, Any] = {"role": role, "content": _text(message.get("content"))}
        if role == "tool":
            item["tool_call_id"] = message.get("tool_call_id")
        calls = []
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                calls.append(
                    {
                        "id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": _arguments(function.get("arguments")),
                    }
                )
        if calls:
            item["tool_calls"] = calls
        messages.append(item)
    return messages


def _responses(body: dict[str, Any]) -> Messages:
    messages: Messages = []
    if isinstance(body.get("instructions"), str):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            role = "system" if role == "developer" else role
            if role in ("system", "user", "assistant"):
                messages.append({"role": role, "content": _text(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = (
                _arguments(item.get("arguments"))
                if kind == "function_call"
                else {"input": item.get("input")}
            )
            call = {"id": item.get("call_id"), "name": item.get("name"), "arguments": arguments}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not last["content"]:
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif str(kind).endswith("_call_output"):
            messages.append(
                {
                    "role": "tool",
                    "content": _text(item.get("output")),
                    "tool_call_id": item.get("call_id"),
                }
            )
    return messages


def _anthropic(body: dict[str, Any]) -> Messages:
    messages: Messages = []
    system = _text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or ():
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        content = message.get("content")
        if not isinstance(content, list):
            messages.append({"role": message["role"], "content": _text(content)})
            continue
        texts, calls = [], []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                calls.append(
                    {
                        "id": block.get("id"),
                        "name": block.get("name"),
                        "arguments": _arguments(block.get("input")),
                    }
                )
            elif block.get("type") == "tool_result":
                messages.append(
                    {
                        "role": "tool",
                        "content": _text(block.get("content")),
                        "tool_call_id": block.get("tool_use_id"),
                    }
                )
        if texts or calls:
            item: dict[str, Any] = {"role": message["role"], "content": "".join(texts)}
            if calls:
                item["tool_calls"] = calls
            messages.append(item)
    return messages


def _embeddings(body: dict[str, Any]) -> Messages:
    inputs = body.get("input")
    texts = inputs if isinstance(inputs, list) else [inputs]
    return [{"role": "user", "content": t} for t in texts if isinstance(t, str)]


_MESSAGES = {
    "chat": _chat,
    "responses": _responses,
    "messages": _anthropic,
    "embeddings": _embeddings,
}
