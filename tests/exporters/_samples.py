"""Trials built directly for the exporter tests, and OTLP request decoding.

Every piece of content (prompts, answers, tool arguments and results, reasoning, tracebacks,
state, judge metadata) carries a `-TEXT` marker, so a test can prove none leaked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.fakes.capture_server import CapturedRequest
from trialkit._record import ErrorInfo
from trialkit.outcome import Outcome
from trialkit.report import RunInfo, SuiteInfo
from trialkit.score import Score, Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import (
    Message,
    ModelCall,
    Reasoning,
    Timing,
    ToolCall,
    Transcript,
    Turn,
    Usage,
)
from trialkit.trial import Trial, TrialStatus

MARKER = "-TEXT"
T0 = datetime(2026, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
RUN = RunInfo(
    id="run-1", name="nightly", started_at=T0, status="running", config={"harness": "agent"}
)
SUITE = SuiteInfo(id="capitals", kind=SuiteKind.REGRESSION)

SYSTEM = {"role": "system", "content": "Be terse SYSTEM-TEXT"}
QUESTION = {"role": "user", "content": "Capital of France? QUESTION-TEXT"}
CALL = {"id": "call_1", "name": "search", "arguments": {"q": "france ARGS-TEXT"}}


def tool_trial() -> Trial:
    """A passing trial: two agent model calls around a tool call, a failed call, a judge."""
    first = ModelCall(
        model="openai/gpt-4o-mini",
        request={"messages": [SYSTEM, QUESTION], "config": {"temperature": 0.2, "max_tokens": 100}},
        response={
            "message": {"role": "assistant", "content": "", "tool_calls": [CALL]},
            "finish_reason": "tool_calls",
            "model": "gpt-4o-mini-2024-07-18",
            "id": "chatcmpl-1",
            "reasoning": ["hmm REASONING-TEXT"],
        },
        usage=Usage(input_tokens=120, output_tokens=10, cache_read_tokens=100),
        cost_usd=0.0001,
        latency_s=0.5,
    )
    second = ModelCall(
        model="openai/gpt-4o-mini",
        request={
            "messages": [
                SYSTEM,
                QUESTION,
                {"role": "assistant", "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Paris RESULT-TEXT"},
            ],
            "config": {"top_p": 0.9},
        },
        response={
            "message": {"role": "assistant", "content": "Paris ANSWER-TEXT"},
            "finish_reason": "stop",
            "model": "gpt-4o-mini-2024-07-18",
            "id": "chatcmpl-2",
        },
        usage=Usage(input_tokens=150, output_tokens=5, reasoning_tokens=3),
        latency_s=0.4,
        retries=1,
    )
    failed = ModelCall(
        model="openai/gpt-4o-mini",
        request={"messages": [QUESTION]},
        error="RateLimitError: slow down",
        latency_s=0.2,
        retries=2,
    )
    judge = ModelCall(
        model="anthropic/claude-haiku",
        role="grader",
        request={"messages": [{"role": "user", "content": "Grade JUDGE-PROMPT-TEXT"}]},
        response={"message": {"role": "assistant", "content": "PASS JUDGE-TEXT"}},
        usage=Usage(input_tokens=40, output_tokens=2, cache_write_tokens=30),
        latency_s=0.3,
    )
    transcript = Transcript(
        messages=[
            Message(**SYSTEM),
            Message(**QUESTION),
            Message(role="assistant", tool_calls=[ToolCall(**CALL)]),
            Message(role="tool", name="search", tool_call_id="call_1", content="Paris RESULT-TEXT"),
            Message(role="assistant", content="Paris ANSWER-TEXT"),
        ],
        tool_calls=[ToolCall(**CALL, result="Paris RESULT-TEXT", duration_s=0.25)],
        reasoning=[Reasoning(content="hmm REASONING-TEXT")],
        turns=[
            Turn(
                index=0,
                input=str(QUESTION["content"]),
                output="Paris ANSWER-TEXT",
                started_at=0.1,
                duration_s=1.5,
            )
        ],
        model_calls=[first, second, failed, judge],
        usage=Usage(input_tokens=270, output_tokens=15, cache_read_tokens=100, reasoning_tokens=3),
        grader_usage=Usage(input_tokens=40, output_tokens=2, cache_write_tokens=30),
        timing=Timing(started_at=T0, setup_s=0.1, agent_s=1.5, capture_s=0.1, grading_s=0.4),
    )
    return Trial(
        run_id="run-1",
        task_id="france",
        index=0,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS,
        model="openai/gpt-4o-mini",
        transcript=transcript,
        outcome=Outcome(output="Paris ANSWER-TEXT", state={"city": "Paris STATE-TEXT"}),
        scores=[
            Score(name="contains", value=1.0, verdict=Verdict.PASS, rationale="found 'paris'"),
            Score(
                name="judge",
                verdict=Verdict.PASS,
                rationale="the judge agrees",
                metadata={"raw": "PASS JUDGE-TEXT"},
            ),
            Score(name="human", verdict=Verdict.UNKNOWN, pending=True),
        ],
        usage=transcript.usage,
        grader_usage=transcript.grader_usage,
        cost_usd=0.0012,
        grader_cost_usd=0.0002,
        started_at=T0,
        duration_s=2.1,
    )


def error_trial() -> Trial:
    """An errored trial: the agent raised before any model call."""
    return Trial(
        run_id="run-1",
        task_id="france",
        index=1,
        status=TrialStatus.ERROR,
        verdict=Verdict.ERROR,
        error=ErrorInfo(
            type="RuntimeError",
            message="agent crashed",
            traceback="Traceback TRACEBACK-TEXT\nRuntimeError: agent crashed",
            phase="agent",
        ),
        started_at=T0,
        duration_s=0.3,
    )


# --- OTLP -----------------------------------------------------------------------------------


@dataclass
class Event:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass
class DecodedSpan:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status: str
    status_message: str
    events: list[Event] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def decode_spans(requests: list[CapturedRequest]) -> list[DecodedSpan]:
    """Every span in these OTLP/HTTP protobuf requests, in the order they were sent."""
    spans = []
    for request in requests:
        assert request.headers["content-type"] == "application/x-protobuf"
        message = ExportTraceServiceRequest()
        message.ParseFromString(request.body)
        for resource_spans in message.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        DecodedSpan(
                            name=span.name,
                            kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes=_attributes(span.attributes),
                            status=span.status.StatusCode.Name(span.status.code),
                            status_message=span.status.message,
                            events=[
                                Event(e.name, e.time_unix_nano, _attributes(e.attributes))
                                for e in span.events
                            ],
                            resource=resource,
                            scope=scope_spans.scope.name,
                        )
                    )
    return spans


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
