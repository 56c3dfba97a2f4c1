"""OTLP/HTTP export: spans, kinds, links, attributes and events, decoded from what was sent."""

from __future__ import annotations

import json
import socket
import sys
import time
from typing import Any

import pytest

from tests.exporters._samples import (
    MARKER,
    RUN,
    SUITE,
    T0,
    DecodedSpan,
    decode_spans,
    error_trial,
    ns,
    tool_trial,
)
from tests.fakes.capture_server import CaptureServer
from trialkit import Suite, Task, graders, run_sync
from trialkit.exporters import OtelExporter
from trialkit.exporters.otel import require_sdk, traces_url
from trialkit.models import ScriptedModel
from trialkit.trial import Trial


def export(server: CaptureServer, *trials: Trial, **options: object) -> list[DecodedSpan]:
    exporter = OtelExporter(server.url, **options)  # type: ignore[arg-type]
    exporter.on_run_start(RUN, SUITE)
    for trial in trials:
        exporter.on_trial(trial)
    exporter.on_run_end(RUN)
    assert exporter.errors == []
    assert exporter.trials == len(trials)
    return decode_spans(server.requests_to("/v1/traces"))


def by_name(spans: list[DecodedSpan]) -> dict[str, list[DecodedSpan]]:
    names: dict[str, list[DecodedSpan]] = {}
    for span in spans:
        names.setdefault(span.name, []).append(span)
    return names


def test_a_trial_is_a_trace_of_genai_spans(capture_server: CaptureServer) -> None:
    spans = export(capture_server, tool_trial())
    assert [(s.name, s.kind) for s in spans] == [
        ("chat gpt-4o-mini", "CLIENT"),
        ("execute_tool search", "INTERNAL"),
        ("chat gpt-4o-mini", "CLIENT"),
        ("chat gpt-4o-mini", "CLIENT"),
        ("chat claude-haiku", "CLIENT"),
        ("invoke_agent agent", "INTERNAL"),
    ]
    root = spans[-1]
    assert root.parent_id == ""
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.parent_id == root.span_id for s in spans[:-1])
    assert root.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agent",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": 270,
        "gen_ai.usage.output_tokens": 15,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.reasoning.output_tokens": 3,
        "trialkit.run.id": "run-1",
        "trialkit.suite.id": "capitals",
        "trialkit.task.id": "france",
        "trialkit.trial.index": 0,
        "trialkit.trial.verdict": "pass",
        "trialkit.trial.status": "completed",
        "trialkit.trial.expect": "success",
        "trialkit.cost_usd": 0.0012,
    }
    assert root.status == "STATUS_CODE_UNSET"
    assert root.resource["service.name"] == "trialkit"
    assert root.scope == "trialkit"


def test_chat_spans_carry_the_request_response_and_usage(capture_server: CaptureServer) -> None:
    chats = by_name(export(capture_server, tool_trial()))["chat gpt-4o-mini"]
    first, second, failed = chats
    assert first.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 100,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "trialkit.model_call.role": "agent",
        "trialkit.turn": 0,
        "trialkit.cost_usd": 0.0001,
    }
    assert second.attributes["gen_ai.request.top_p"] == 0.9
    assert second.attributes["gen_ai.usage.reasoning.output_tokens"] == 3
    assert second.attributes["trialkit.model_call.retries"] == 1
    assert failed.attributes["error.type"] == "RateLimitError"
    assert (failed.status, failed.status_message) == (
        "STATUS_CODE_ERROR",
        "RateLimitError: slow down",
    )
    assert first.status == "STATUS_CODE_UNSET"


def test_judge_calls_and_cache_writes(capture_server: CaptureServer) -> None:
    (judge,) = by_name(export(capture_server, tool_trial()))["chat claude-haiku"]
    assert judge.attributes["gen_ai.provider.name"] == "anthropic"
    assert judge.attributes["trialkit.model_call.role"] == "grader"
    assert judge.attributes["gen_ai.usage.cache_creation.input_tokens"] == 30


def test_tool_spans(capture_server: CaptureServer) -> None:
    (tool,) = by_name(export(capture_server, tool_trial()))["execute_tool search"]
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "trialkit.turn": 0,
    }


def test_each_score_is_an_evaluation_event_on_the_root(capture_server: CaptureServer) -> None:
    root = export(capture_server, tool_trial())[-1]
    assert [(e.name, e.attributes) for e in root.events] == [
        (
            "gen_ai.evaluation.result",
            {
                "gen_ai.evaluation.name": "contains",
                "gen_ai.evaluation.score.label": "pass",
                "gen_ai.evaluation.score.value": 1.0,
                "gen_ai.evaluation.explanation": "found 'paris'",
            },
        ),
        (
            "gen_ai.evaluation.result",
            {
                "gen_ai.evaluation.name": "judge",
                "gen_ai.evaluation.score.label": "pass",
                "gen_ai.evaluation.explanation": "the judge agrees",
            },
        ),
    ]  # the pending human score has no result yet
    assert root.events[0].time_ns == root.end_ns


def test_spans_are_laid_out_inside_the_trial_from_its_timings(
    capture_server: CaptureServer,
) -> None:
    spans = export(capture_server, tool_trial())
    start = ns(T0)
    offsets = [((s.start_ns - start) / 1e9, (s.end_ns - start) / 1e9) for s in spans]
    assert offsets == [
        pytest.approx((0.1, 0.6)),  # the first call starts with the turn
        pytest.approx((0.6, 0.85)),  # the tool it asked for runs after it
        pytest.approx((0.85, 1.25)),
        pytest.approx((1.25, 1.45)),
        pytest.approx((1.7, 2.0)),  # the judge starts with grading
        pytest.approx((0.0, 2.1)),
    ]


def test_an_errored_trial_sets_the_root_status(capture_server: CaptureServer) -> None:
    (root,) = export(capture_server, error_trial())
    assert root.status == "STATUS_CODE_ERROR"
    assert root.status_message == "RuntimeError: agent crashed"
    assert root.attributes["error.type"] == "RuntimeError"
    assert root.attributes["trialkit.error.phase"] == "agent"
    assert root.attributes["trialkit.trial.verdict"] == "error"


def test_content_is_left_out_by_default(capture_server: CaptureServer) -> None:
    export(capture_server, tool_trial(), error_trial())
    for request in capture_server.requests:
        assert MARKER.encode() not in request.body
        assert b"gen_ai.input.messages" not in request.body


def test_content_goes_in_opt_in_attributes(capture_server: CaptureServer) -> None:
    spans = by_name(export(capture_server, tool_trial(), include_content=True))
    first, second, _ = spans["chat gpt-4o-mini"]
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be terse SYSTEM-TEXT"}
    ]
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Capital of France? QUESTION-TEXT"}]}
    ]
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "hmm REASONING-TEXT"},
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "search",
                    "arguments": {"q": "france ARGS-TEXT"},
                },
            ],
            "finish_reason": "tool_calls",
        }
    ]
    inputs = json.loads(second.attributes["gen_ai.input.messages"])
    assert inputs[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": "Paris RESULT-TEXT"}],
    }
    (tool,) = spans["execute_tool search"]
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"q": "france ARGS-TEXT"}
    assert tool.attributes["gen_ai.tool.call.result"] == "Paris RESULT-TEXT"
    (root,) = spans["invoke_agent agent"]
    assert json.loads(root.attributes["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Paris ANSWER-TEXT"}]}
    ]


def test_ids_are_the_same_each_time_a_trial_is_exported() -> None:
    with CaptureServer() as one, CaptureServer() as two:
        first = export(one, tool_trial(), error_trial())
        again = export(two, tool_trial(), error_trial())
    assert [(s.trace_id, s.span_id, s.parent_id) for s in first] == [
        (s.trace_id, s.span_id, s.parent_id) for s in again
    ]
    assert len({s.trace_id for s in first}) == 2
    assert len({s.span_id for s in first}) == len(first)


def test_headers_go_with_the_requests_and_nowhere_else(capture_server: CaptureServer) -> None:
    secret = "sk-test-SECRET-0123456789"
    exporter = OtelExporter(capture_server.url, headers={"Authorization": f"Bearer {secret}"})
    assert secret not in repr(exporter)
    export(capture_server, tool_trial(), include_content=True, headers={"x-api-key": secret})
    for request in capture_server.requests:
        assert request.headers["x-api-key"] == secret
        assert secret.encode() not in request.body


def test_a_refused_export_is_reported_and_stops_sending(capture_server: CaptureServer) -> None:
    capture_server.fail("/v1/traces", 401)
    exporter = OtelExporter(capture_server.url, max_pending=1)
    exporter.on_run_start(RUN, SUITE)
    for index in range(5):
        exporter.on_trial(tool_trial().model_copy(update={"index": index}))
    exporter.on_run_end(RUN)
    assert exporter.trials == 0
    refused, missing = exporter.errors
    assert refused.startswith(f"exporting traces to {capture_server.url}/v1/traces failed: ")
    assert "401" in refused  # the SDK's own words follow
    assert missing == f"5 of 5 trials were not sent to {capture_server.url}/v1/traces"
    assert len(capture_server.requests) < 5


def test_an_unreachable_endpoint_fails_quickly() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exporter = OtelExporter(f"http://127.0.0.1:{port}", timeout=0.5)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(tool_trial())
    started = time.monotonic()
    exporter.on_run_end(RUN)
    assert time.monotonic() - started < 5
    assert exporter.trials == 0
    assert exporter.errors[0].startswith(f"exporting traces to http://127.0.0.1:{port}/v1/traces")


def test_a_run_exports_its_trials_as_they_finish(capture_server: CaptureServer) -> None:
    suite = Suite(
        id="capitals",
        model=ScriptedModel("agent", ["Paris"]),
        tasks=[Task(id="france", input="Capital?", graders=[graders.contains("Paris")])],
        trials=2,
    )
    exporter = OtelExporter(capture_server.url)
    report = run_sync(suite, exporters=[exporter])
    assert exporter.errors == []
    spans = decode_spans(capture_server.requests_to("/v1/traces"))
    roots = [s for s in spans if s.parent_id == ""]
    assert sorted(r.attributes["trialkit.trial.index"] for r in roots) == [0, 1]
    assert {r.name for r in roots} == {"invoke_agent scripted/agent"}
    assert {r.attributes["trialkit.run.id"] for r in roots} == {report.run.id}
    chats = [s for s in spans if s.name == "chat agent"]
    assert len(chats) == 2
    assert {c.attributes["gen_ai.provider.name"] for c in chats} == {"scripted"}
    assert [e.attributes["gen_ai.evaluation.name"] for r in roots for e in r.events] == [
        "contains('Paris')",
        "contains('Paris')",
    ]


def test_endpoints() -> None:
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_url("https://x/v1/traces") == "https://x/v1/traces"
    with pytest.raises(ValueError, match="expected an http"):
        traces_url("collector:4318")


def test_the_sdk_disabled_by_the_environment_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    with pytest.raises(ValueError, match="OTEL_SDK_DISABLED"):
        OtelExporter("http://127.0.0.1:1")


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ImportError, match=r"pip install 'trialkit\[otel\]'"):
        require_sdk()


def test_a_trial_that_cannot_be_traced_does_not_stop_the_others(
    capture_server: CaptureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trialkit.exporters.otel as otel
    from trialkit.exporters._genai import plan_trial as real

    def plan(trial: Trial, **options: Any) -> Any:
        if trial.index == 1:
            raise TypeError("unexpected data")
        return real(trial, **options)

    monkeypatch.setattr(otel, "plan_trial", plan)
    exporter = OtelExporter(capture_server.url)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(error_trial())
    exporter.on_trial(tool_trial())
    exporter.on_run_end(RUN)
    assert exporter.trials == 1
    assert exporter.errors == ["trial france#1: no trace: TypeError: unexpected data"]


def test_the_sdk_environment_headers_apply(
    capture_server: CaptureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=blue")
    export(capture_server, error_trial())
    assert {r.headers["x-team"] for r in capture_server.requests} == {"blue"}
