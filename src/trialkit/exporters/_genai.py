"""A trial as OpenTelemetry GenAI spans, planned as plain data (no OpenTelemetry import here).

The conventions are those of the GenAI semantic conventions (Development status):

- `invoke_agent {agent}` (INTERNAL: the agent runs in-process) for the trial, the root;
- `chat {model}` (CLIENT) for each model call, the agent's and the judges';
- `execute_tool {tool}` (INTERNAL) for each tool call;
- a `gen_ai.evaluation.result` event on the root for each score (but those still waiting for
  a human reviewer, which have no result yet).

Model calls record how long they took but not when they started, so their spans are laid out
one after the other from the start of their turn (judges' calls from the start of grading), and
each tool call right after the model call that asked for it, unless the tool call recorded its
own start. The layout is approximate; durations are exact. Everything stays inside the trial.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from trialkit._record import clean_text
from trialkit.capture.views import api_of, request_view
from trialkit.score import Score
from trialkit.transcript import Message, ModelCall, ToolCall, Transcript
from trialkit.trial import Trial

AttributeValue = str | bool | int | float | list[str]
Attributes = dict[str, AttributeValue]

EVALUATION_EVENT = "gen_ai.evaluation.result"


@dataclass
class EventPlan:
    name: str
    at_s: float
    """Seconds after the trial started."""
    attributes: Attributes


@dataclass
class SpanPlan:
    name: str
    kind: Literal["internal", "client"]
    start_s: float
    """Seconds after the trial started."""
    end_s: float
    attributes: Attributes
    error: str | None = None
    """The status description when the span ended in error (`None`: no error)."""
    events: list[EventPlan] = field(default_factory=list)
    children: list[SpanPlan] = field(default_factory=list)


def agent_name(config: dict[str, Any], suite_id: str | None, trial: Trial) -> str:
    """What `gen_ai.agent.name` says: the harness's name, or the model for a plain chat."""
    harness = config.get("harness")
    if harness == "chat" and trial.model:
        return trial.model
    if isinstance(harness, str) and harness:
        return harness
    return suite_id or trial.task_id


def plan_trial(
    trial: Trial,
    *,
    agent: str,
    suite_id: str | None = None,
    include_content: bool = False,
) -> SpanPlan:
    """The spans of one trial: the root `invoke_agent` span with its children and events."""
    total = max(trial.duration_s, 0.0)
    attributes: Attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "trialkit.run.id": trial.run_id,
        "trialkit.task.id": trial.task_id,
        "trialkit.trial.index": trial.index,
        "trialkit.trial.verdict": trial.verdict.value,
        "trialkit.trial.status": trial.status.value,
        "trialkit.trial.expect": trial.expect,
    }
    if suite_id is not None:
        attributes["trialkit.suite.id"] = suite_id
    if trial.model:
        attributes["gen_ai.request.model"] = _model_name(trial.model)
    if trial.cost_usd is not None:
        attributes["trialkit.cost_usd"] = trial.cost_usd
    _add_usage(attributes, trial.usage.model_dump())
    error = None
    if trial.error is not None:
        attributes["error.type"] = trial.error.type
        if trial.error.phase:
            attributes["trialkit.error.phase"] = trial.error.phase
        error = trial.error.summary()
    if include_content:
        inputs = [m for turn in trial.transcript.turns for m in _turn_messages(turn.input)]
        if inputs:
            attributes["gen_ai.input.messages"] = _json(_input_messages(inputs)[1])
        if trial.outcome.output is not None:
            output = {"role": "assistant", "parts": [_text(trial.outcome.output)]}
            attributes["gen_ai.output.messages"] = _json([output])
    root = SpanPlan(
        name=f"invoke_agent {agent}",
        kind="internal",
        start_s=0.0,
        end_s=total,
        attributes=attributes,
        error=error,
    )
    calls, tools = layout(trial.transcript, total=total)
    root.children.extend(
        _chat_plan(call, start, end, include_content)
        for call, (start, end) in zip(trial.transcript.model_calls, calls, strict=True)
    )
    root.children.extend(
        _tool_plan(call, start, end, include_content)
        for call, (start, end) in zip(trial.transcript.tool_calls, tools, strict=True)
    )
    root.children.sort(key=lambda span: span.start_s)
    root.events.extend(evaluation_event(s, total) for s in trial.scores if not s.pending)
    return root


def evaluation_event(score: Score, at_s: float) -> EventPlan:
    attributes: Attributes = {
        "gen_ai.evaluation.name": score.name,
        "gen_ai.evaluation.score.label": score.verdict.value,
    }
    if score.value is not None:
        attributes["gen_ai.evaluation.score.value"] = score.value
    if score.rationale:
        attributes["gen_ai.evaluation.explanation"] = score.rationale
    if score.error is not None:
        attributes["error.type"] = score.error.type
    return EventPlan(name=EVALUATION_EVENT, at_s=at_s, attributes=attributes)


# --- timing ---------------------------------------------------------------------------------


def layout(
    transcript: Transcript, *, total: float
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Estimated (start, end) offsets of each model call and each tool call, in order."""
    timing = transcript.timing
    turn_starts = {turn.index: turn.started_at for turn in transcript.turns}
    grading_start = timing.setup_s + timing.agent_s + timing.capture_s
    tool_index = {call.id: i for i, call in enumerate(transcript.tool_calls)}
    tools: list[tuple[float, float] | None] = [None] * len(transcript.tool_calls)
    calls: list[tuple[float, float]] = []
    cursor = timing.setup_s
    graded = False
    for call in transcript.model_calls:
        if call.role == "grader":
            if not graded:
                cursor, graded = max(cursor, grading_start), True
        else:
            cursor = max(cursor, turn_starts.get(call.turn, cursor))
        start = cursor
        cursor = start + (call.latency_s or 0.0)
        calls.append(_clamp(start, cursor, total))
        for call_id in _requested_tool_ids(call):
            i = tool_index.get(call_id)
            if i is None or tools[i] is not None:
                continue
            tool = transcript.tool_calls[i]
            tool_start = tool.started_at if tool.started_at is not None else cursor
            tool_end = tool_start + (tool.duration_s or 0.0)
            tools[i] = _clamp(tool_start, tool_end, total)
            cursor = max(cursor, tool_end)
    placed: list[tuple[float, float]] = []
    for i, tool in enumerate(transcript.tool_calls):
        span = tools[i]
        if span is None:
            begin = tool.started_at
            if begin is None:
                begin = turn_starts.get(tool.turn, timing.setup_s)
            span = _clamp(begin, begin + (tool.duration_s or 0.0), total)
        placed.append(span)
    return calls, placed


def _clamp(start: float, end: float, total: float) -> tuple[float, float]:
    start = min(max(start, 0.0), total)
    return start, min(max(end, start), total)


def _requested_tool_ids(call: ModelCall) -> list[str]:
    message = (call.response or {}).get("message") or {}
    return [str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, dict)]


# --- spans ----------------------------------------------------------------------------------


def provider_name(model_id: str) -> str:
    """`gen_ai.provider.name` from a trialkit model id (`openai/gpt-4o` -> `openai`)."""
    provider, sep, _ = model_id.partition("/")
    return provider if sep else "_OTHER"


def _model_name(model_id: str) -> str:
    _, sep, name = model_id.partition("/")
    return name if sep else model_id


def _chat_plan(call: ModelCall, start: float, end: float, include_content: bool) -> SpanPlan:
    request_messages, config = request_view(call)  # a captured call's body, in the same terms
    response = call.response or {}
    model = _model_name(call.model)
    embeddings = api_of(call) == "embeddings"
    attributes: Attributes = {
        "gen_ai.operation.name": "embeddings" if embeddings else "chat",
        "gen_ai.provider.name": provider_name(call.model),
        "gen_ai.request.model": model,
        "trialkit.model_call.role": call.role,
        "trialkit.turn": call.turn,
    }
    if call.endpoint is not None:
        attributes["url.full"] = call.endpoint.partition(" ")[2]
        if call.status is not None:
            attributes["http.response.status_code"] = call.status
    for key, name in _REQUEST_SETTINGS.items():
        value = config.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        attributes[name] = int(value) if key in ("max_tokens", "seed") else float(value)
    stop = config.get("stop")
    if isinstance(stop, list) and stop:
        attributes["gen_ai.request.stop_sequences"] = [str(s) for s in stop]
    if response.get("model"):
        attributes["gen_ai.response.model"] = str(response["model"])
    if response.get("id"):
        attributes["gen_ai.response.id"] = str(response["id"])
    if response.get("finish_reason"):
        attributes["gen_ai.response.finish_reasons"] = [str(response["finish_reason"])]
    _add_usage(attributes, call.usage.model_dump())
    if call.cost_usd is not None:
        attributes["trialkit.cost_usd"] = call.cost_usd
    if call.retries:
        attributes["trialkit.model_call.retries"] = call.retries
    if call.replayed:
        attributes["trialkit.model_call.replayed"] = True
    error = None
    if call.error is not None:
        error_type, _, _ = call.error.partition(":")
        attributes["error.type"] = error_type.strip() or "_OTHER"
        error = call.error
    if include_content:
        system, inputs = _input_messages(request_messages)
        if system:
            attributes["gen_ai.system_instructions"] = _json(system)
        if inputs:
            attributes["gen_ai.input.messages"] = _json(inputs)
        if response.get("message"):
            attributes["gen_ai.output.messages"] = _json([_output_message(response)])
    return SpanPlan(
        name=f"{'embeddings' if embeddings else 'chat'} {model}",
        kind="client",
        start_s=start,
        end_s=end,
        attributes=attributes,
        error=error,
    )


_REQUEST_SETTINGS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
}


def _tool_plan(call: ToolCall, start: float, end: float, include_content: bool) -> SpanPlan:
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "trialkit.turn": call.turn,
    }
    error = None
    if call.is_error:
        attributes["error.type"] = "tool_error"
        error = "the tool reported an error"
    if include_content:
        attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
        if call.result is not None:
            attributes["gen_ai.tool.call.result"] = call.result
    return SpanPlan(
        name=f"execute_tool {call.name}",
        kind="internal",
        start_s=start,
        end_s=end,
        attributes=attributes,
        error=error,
    )


def _add_usage(attributes: Attributes, usage: dict[str, int]) -> None:
    for key, name in _USAGE.items():
        value = usage.get(key, 0)
        if value or key in ("input_tokens", "output_tokens"):
            attributes[name] = value


_USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}


# --- message content (only with include_content) --------------------------------------------


def _turn_messages(turn_input: str | list[Message]) -> list[dict[str, Any]]:
    if isinstance(turn_input, str):
        return [{"role": "user", "content": turn_input}]
    return [m.model_dump(mode="json") for m in turn_input]


def _input_messages(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system instructions, input messages) in the GenAI JSON schema, from message dicts."""
    system: list[dict[str, Any]] = []
    inputs: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role", "user")
        content = str(message.get("content") or "")
        if role == "system":
            if content:
                system.append(_text(content))
            continue
        if role == "tool":
            part = {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": content,
            }
            inputs.append({"role": "tool", "parts": [part]})
            continue
        inputs.append({"role": role, "parts": _parts(content, message.get("tool_calls"))})
    return system, inputs


def _output_message(response: dict[str, Any]) -> dict[str, Any]:
    message = response.get("message") or {}
    parts = [{"type": "reasoning", "content": str(r)} for r in response.get("reasoning") or []]
    parts.extend(_parts(str(message.get("content") or ""), message.get("tool_calls")))
    output: dict[str, Any] = {"role": "assistant", "parts": parts}
    if response.get("finish_reason"):
        output["finish_reason"] = response["finish_reason"]
    return output


def _parts(content: str, tool_calls: Any) -> list[dict[str, Any]]:
    parts = [_text(content)] if content else []
    for call in tool_calls or []:
        if isinstance(call, dict):
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("arguments") or {},
                }
            )
    return parts


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def _json(value: Any) -> str:
    return clean_text(json.dumps(value, ensure_ascii=False, default=str))
