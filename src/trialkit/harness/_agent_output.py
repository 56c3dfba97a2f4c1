"""Reading what a command-line agent printed: one JSON object, JSON events (stream-JSON, one a
line) or plain text, folded into an `Answer` (its output, failure, messages, tool calls,
reasoning, token usage, cost and session id).

The JSON shapes are Claude Code's (`--output-format json` and `stream-json`) and Codex's
(`codex exec --json`: `thread.started`, `item.started` / `item.completed` with agent messages,
reasoning, commands, file changes and MCP tool calls, `turn.completed` with usage,
`turn.failed` / `error`), read loosely enough for other agents: any JSON object with a
`result`, `output` or `text` field is an answer.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from trialkit.harness.base import HarnessError
from trialkit.transcript import Message, ToolCall, Usage

__all__ = ["AgentOutputError", "Answer", "Events", "OutputFormat", "interpret"]

OutputFormat = Literal["auto", "json", "stream-json", "text"]

_CODEX_TYPES = (
    "thread.started",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "item.started",
    "item.updated",
    "item.completed",
    "error",
)
_EVENT_TYPES = ("system", "assistant", "user", "result", *_CODEX_TYPES)


class AgentOutputError(HarnessError, ValueError):
    """The agent's output is not in the format the harness was told to expect."""


@dataclass
class Answer:
    """What the agent's output of one turn says, before it becomes the turn's `Reply`."""

    output: str | None = None
    is_error: bool = False
    error: str | None = None
    messages: list[Message] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    cost_usd: float | None = None
    session_id: str | None = None


def interpret(mode: OutputFormat, stdout: str, events: Events) -> Answer:
    """The answer in `stdout` (what was kept of it), read as `mode` says; `events` holds the
    same output, fed line by line as it arrived (for stream-JSON). Raises `AgentOutputError`
    when the output is not what `mode` promised."""
    printed = stdout.strip()
    if mode == "text" or not printed:
        return Answer(output=printed or None)
    if mode == "stream-json":
        if not events.count:
            raise AgentOutputError(f"expected JSON events, one a line; got {_excerpt(printed)}")
        return events.answer()
    whole = _loads(printed)
    if isinstance(whole, list) and any(_is_event(e) for e in whole):
        replay = Events(events.limit)  # Claude Code's `--output-format json --verbose`
        for event in whole:
            replay.feed(json.dumps(event), None)
        return replay.answer()
    if _is_event(whole) and whole.get("type") != "result":
        return events.answer()  # a stream of one event, cut short
    if not isinstance(whole, dict) and mode == "auto":
        if events.typed and not events.bad_lines:
            return events.answer()
        return Answer(output=printed)
    if not isinstance(whole, dict):
        whole = _loads(printed.rsplit("\n", 1)[-1])  # logs first, then the JSON
        if not isinstance(whole, dict):
            raise AgentOutputError(f"expected a JSON object; got {_excerpt(printed)}")
    answer = _from_result(whole)
    if answer.output is None and not answer.is_error:
        answer.output = printed  # JSON without an answer field is the answer itself
    return answer


def _is_event(value: object) -> bool:
    return isinstance(value, dict) and value.get("type") in _EVENT_TYPES


class Events:
    """Stream-JSON events (Claude Code's shape), folded into messages, tool calls and an
    answer. After `limit` bytes only the final `result` and session ids are still read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.count = 0
        self.typed = 0
        """Events of the types this reads (others are counted, not read)."""
        self.bad_lines = 0
        self.messages: list[Message] = []
        self.calls: dict[str, ToolCall] = {}
        self.reasoning: list[str] = []
        self.result: dict[str, Any] | None = None
        self.session_id: str | None = None
        self._usage: dict[str, Usage] = {}
        self._message_id: str | None = None
        self.failure: str | None = None
        """A failure the events reported without a final result (Codex's `turn.failed`)."""

    def feed(self, line: str, at: float | None) -> None:
        if not line.strip():
            return
        event = _loads(line)
        if not isinstance(event, dict):
            self.bad_lines += 1
            return
        self.count += 1
        self.typed += _is_event(event)
        self.session_id = _str(event.get("session_id")) or self.session_id
        if event.get("type") == "result":
            self.result = event
            return
        self.size += len(line)
        if event.get("type") in _CODEX_TYPES:
            self._codex(event, at)
            return
        message = event.get("message")
        if self.size > self.limit or not isinstance(message, dict):
            return
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if event.get("type") == "assistant":
            self._assistant(message, blocks, at)
        elif event.get("type") == "user":
            self._tool_results(blocks, at)

    def _assistant(
        self, message: dict[str, Any], blocks: list[dict[str, Any]], at: float | None
    ) -> None:
        message_id = _str(message.get("id"))
        usage = _usage(message.get("usage"))
        if message_id is not None and usage is not None:
            self._usage[message_id] = usage  # repeated on every block of the message
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                self.reasoning.append(block["thinking"])
            elif kind == "tool_use":
                arguments = block.get("input")
                call = ToolCall(
                    id=_str(block.get("id")) or f"call_{len(self.calls) + 1}",
                    name=_str(block.get("name")) or "unknown",
                    arguments=arguments if isinstance(arguments, dict) else {"input": arguments},
                    started_at=at,
                )
                self.calls[call.id] = call
                calls.append(call)
        if not texts and not calls:
            return
        last = self.messages[-1] if self.messages else None
        if last is None or last.role != "assistant" or message_id != self._message_id:
            last = Message(role="assistant")
            self.messages.append(last)
            self._message_id = message_id
        last.content = "\n".join(filter(None, [last.content, *texts]))
        last.tool_calls.extend(calls)

    def _tool_results(self, blocks: list[dict[str, Any]], at: float | None) -> None:
        for block in blocks:
            if block.get("type") != "tool_result":
                continue
            call_id = _str(block.get("tool_use_id"))
            text = _content_text(block.get("content"))
            call = self.calls.get(call_id or "")
            if call is not None:
                call.result, call.is_error = text, block.get("is_error") is True
                if at is not None and call.started_at is not None:
                    call.duration_s = at - call.started_at
            self.messages.append(
                Message(
                    role="tool",
                    content=text,
                    name=call.name if call is not None else None,
                    tool_call_id=call_id,
                )
            )
            self._message_id = None

    def _codex(self, event: dict[str, Any], at: float | None) -> None:
        """One event of `codex exec --json`."""
        kind = event.get("type")
        if kind == "thread.started":
            self.session_id = _str(event.get("thread_id")) or self.session_id
        elif kind == "turn.completed":
            usage = _usage(event.get("usage"))
            if usage is not None:
                self._usage[f"turn {len(self._usage)}"] = usage
        elif kind in ("turn.failed", "error"):
            self.failure = _content_text(event.get("error") or event.get("message")) or kind
        item = event.get("item")
        if self.size > self.limit or not isinstance(item, dict):
            return
        done = kind == "item.completed"
        item_kind = item.get("type") or item.get("item_type")
        text = _str(item.get("text"))
        if item_kind in ("agent_message", "assistant_message") and done and text:
            self.messages.append(Message(role="assistant", content=text))
            self._message_id = None
        elif item_kind == "reasoning" and done and text:
            self.reasoning.append(text)
        elif item_kind in _CODEX_TOOLS:
            self._codex_tool(item, str(item_kind), at, done=done)

    def _codex_tool(self, item: dict[str, Any], kind: str, at: float | None, *, done: bool) -> None:
        """A command, file change, MCP tool call or web search: a tool call with its result."""
        call_id = _str(item.get("id")) or f"call_{len(self.calls) + 1}"
        call = self.calls.get(call_id)
        if call is None:
            name, arguments = _codex_call(item, kind)
            call = ToolCall(id=call_id, name=name, arguments=arguments, started_at=at)
            self.calls[call_id] = call
            self.messages.append(Message(role="assistant", tool_calls=[call]))
        if not done:
            return
        call.result = _codex_result(item, kind)
        exit_code = item.get("exit_code")
        call.is_error = item.get("status") == "failed" or (
            isinstance(exit_code, int) and exit_code != 0
        )
        if at is not None and call.started_at is not None:
            call.duration_s = at - call.started_at
        self.messages.append(
            Message(role="tool", content=call.result, name=call.name, tool_call_id=call.id)
        )

    def answer(self) -> Answer:
        said = (m.content for m in reversed(self.messages) if m.role == "assistant" and m.content)
        last_said = next(said, "")
        answer = _from_result(self.result) if self.result is not None else Answer()
        if self.result is None and self.failure is not None:
            answer.is_error, answer.error = True, self.failure
        if self.result is None or answer.output is None:
            answer.output = last_said or None
        if answer.usage is None and self._usage:
            answer.usage = sum(self._usage.values(), Usage())
        answer.messages = self.messages
        answer.calls = list(self.calls.values())
        answer.reasoning = self.reasoning
        answer.session_id = answer.session_id or self.session_id
        return answer


_CODEX_TOOLS = ("command_execution", "file_change", "mcp_tool_call", "web_search")


def _codex_call(item: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    """The name and arguments of a Codex item as a tool call (`mcp__SERVER__TOOL` for MCP, as
    Claude Code names them, so calls to trialkit's own server are not recorded twice)."""
    if kind == "command_execution":
        return "command_execution", {"command": item.get("command")}
    if kind == "file_change":
        return "file_change", {"changes": item.get("changes")}
    if kind == "web_search":
        return "web_search", {"query": item.get("query")}
    arguments = item.get("arguments")
    server, tool = _str(item.get("server")) or "unknown", _str(item.get("tool")) or "unknown"
    return f"mcp__{server}__{tool}", arguments if isinstance(arguments, dict) else {}


def _codex_result(item: dict[str, Any], kind: str) -> str:
    if kind == "command_execution":
        return str(item.get("aggregated_output") or "")
    if kind == "mcp_tool_call":
        error = item.get("error")
        if error:
            return _content_text(error)
        result = item.get("result")
        if isinstance(result, dict) and "content" in result:
            return _content_text(result["content"])
        return _content_text(result)
    return _content_text(item.get("status"))


_ANSWER_KEYS = ("result", "output", "text")


def _from_result(obj: dict[str, Any]) -> Answer:
    """A final JSON object: Claude Code's `result`, or any object with an answer field."""
    output = next((obj[k] for k in _ANSWER_KEYS if obj.get(k) is not None), None)
    if output is not None and not isinstance(output, str):
        output = json.dumps(output, ensure_ascii=False)
    subtype = _str(obj.get("subtype"))
    failure = _content_text(obj.get("error")) if obj.get("error") else None
    is_error = (
        obj.get("is_error") is True
        or (subtype is not None and subtype.startswith("error"))
        or (failure is not None and output is None)
    )
    return Answer(
        output=output,
        is_error=is_error,
        error=(failure or output or subtype or "the agent reported failure") if is_error else None,
        usage=_usage(obj.get("usage")),
        cost_usd=_dollars(obj.get("total_cost_usd", obj.get("cost_usd"))),
        session_id=_str(obj.get("session_id")),
    )


def _dollars(raw: object) -> float | None:
    """A cost the agent reported (Claude Code's `total_cost_usd`), when it is one."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    return float(raw) if math.isfinite(raw) and raw >= 0 else None


def _usage(raw: object) -> Usage | None:
    """Token usage as agents report it, with OpenTelemetry semantics (input includes cache)."""
    if not isinstance(raw, dict):
        return None

    def count(key: str) -> int:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0
        return int(value) if math.isfinite(value) and value >= 0 else 0

    cache_read, cache_write = count("cache_read_input_tokens"), count("cache_creation_input_tokens")
    if "prompt_tokens" in raw:
        inputs, outputs = count("prompt_tokens"), count("completion_tokens")
    else:  # Anthropic's input_tokens leaves the cached tokens out
        inputs, outputs = count("input_tokens") + cache_read + cache_write, count("output_tokens")
    usage = Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        cache_read_tokens=cache_read + count("cached_input_tokens"),
        cache_write_tokens=cache_write,
        reasoning_tokens=count("reasoning_output_tokens") or count("reasoning_tokens"),
    )
    return None if usage.is_empty() else usage


def _content_text(content: object) -> str:
    """A tool result's or an error's content as text: a string, text blocks, or JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b["text"] if isinstance(b, dict) and isinstance(b.get("text"), str) else f"[{_kind(b)}]"
            for b in content
        ]
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("message"), str):
        return str(content["message"])
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _kind(block: object) -> str:
    return str(block.get("type", "content")) if isinstance(block, dict) else "content"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")
