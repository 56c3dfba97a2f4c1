"""Langfuse: traces over its OTLP endpoint with its headers, scores through its REST API."""

from __future__ import annotations

import base64
import os

import pytest

from tests.exporters._samples import RUN, SUITE, decode_spans, error_trial, tool_trial
from tests.fakes.capture_server import CaptureServer
from trialkit.exporters import LangfuseExporter

PUBLIC = "pk-lf-public"
SECRET = "sk-lf-SECRET-4242"
TRACES = "/api/public/otel/v1/traces"
SCORES = "/api/public/scores"


def export(exporter: LangfuseExporter) -> LangfuseExporter:
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(tool_trial())
    exporter.on_trial(error_trial())
    exporter.on_run_end(RUN)
    return exporter


def test_traces_go_to_the_otel_endpoint_with_basic_auth(capture_server: CaptureServer) -> None:
    exporter = export(LangfuseExporter(capture_server.url, PUBLIC, SECRET))
    assert exporter.errors == []
    requests = capture_server.requests_to(TRACES)
    token = base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
    assert {r.headers["authorization"] for r in requests} == {f"Basic {token}"}
    assert {r.headers["x-langfuse-ingestion-version"] for r in requests} == {"4"}
    roots = [s for s in decode_spans(requests) if s.parent_id == ""]
    assert [r.attributes["langfuse.trace.name"] for r in roots] == ["france#0", "france#1"]
    assert {r.attributes["langfuse.session.id"] for r in roots} == {"run-1"}
    assert roots[0].attributes["langfuse.trace.tags"] == ["capitals", "pass"]
    assert roots[1].attributes["langfuse.trace.metadata.verdict"] == "error"


def test_scores_are_posted_after_their_traces(capture_server: CaptureServer) -> None:
    exporter = export(LangfuseExporter(capture_server.url, PUBLIC, SECRET))
    assert exporter.scores == 4
    sent: set[str] = set()  # trace ids sent so far
    for request in capture_server.requests:
        if request.path == TRACES:
            sent |= {s.trace_id for s in decode_spans([request])}
        else:
            assert request.json["traceId"] in sent
    first, second = (
        s.trace_id for s in decode_spans(capture_server.requests_to(TRACES)) if not s.parent_id
    )
    scores = capture_server.requests_to(SCORES)
    token = base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
    assert {s.headers["authorization"] for s in scores} == {f"Basic {token}"}
    assert {s.headers["content-type"] for s in scores} == {"application/json"}
    assert [s.json for s in scores] == [
        {
            "id": f"{first}-verdict",
            "traceId": first,
            "name": "trialkit.verdict",
            "value": "pass",
            "dataType": "CATEGORICAL",
        },
        {
            "id": f"{first}-0",
            "traceId": first,
            "name": "contains",
            "value": 1.0,
            "dataType": "NUMERIC",
            "comment": "found 'paris'",
            "metadata": {"verdict": "pass"},
        },
        {
            "id": f"{first}-1",
            "traceId": first,
            "name": "judge",
            "value": "pass",
            "dataType": "CATEGORICAL",
            "comment": "the judge agrees",
            "metadata": {"verdict": "pass"},
        },
        {
            "id": f"{second}-verdict",
            "traceId": second,
            "name": "trialkit.verdict",
            "value": "error",
            "dataType": "CATEGORICAL",
            "comment": "RuntimeError: agent crashed",
        },
    ]


def test_the_keys_never_reach_a_body(capture_server: CaptureServer) -> None:
    exporter = export(LangfuseExporter(capture_server.url, PUBLIC, SECRET, include_content=True))
    assert SECRET not in repr(exporter)
    token = base64.b64encode(f"{PUBLIC}:{SECRET}".encode())
    for request in capture_server.requests:
        assert SECRET.encode() not in request.body
        assert token not in request.body


def test_settings_come_from_the_environment(
    capture_server: CaptureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGFUSE_BASE_URL", capture_server.url + "/")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    exporter = export(LangfuseExporter())
    assert exporter.url == capture_server.url + TRACES
    assert exporter.scores == 4


def test_missing_settings_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "LANGFUSE_HOST",
        "LANGFUSE_BASE_URL",
        "LANGFUSE_PUBLIC_KEY",
        "LANGFUSE_SECRET_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(
        ValueError, match=r"needs LANGFUSE_HOST \(the Langfuse URL\), LANGFUSE_PUBLIC"
    ):
        LangfuseExporter()
    with pytest.raises(ValueError, match=r"needs LANGFUSE_SECRET_KEY$"):
        LangfuseExporter("http://127.0.0.1:1", PUBLIC)
    with pytest.raises(ValueError, match="expected an http"):
        LangfuseExporter("cloud.langfuse.com", PUBLIC, SECRET)


def test_a_refused_score_stops_the_scores(capture_server: CaptureServer) -> None:
    capture_server.fail(SCORES, 401, b'{"message": "Invalid credentials"}')
    exporter = export(LangfuseExporter(capture_server.url, PUBLIC, SECRET))
    assert exporter.trials == 2
    assert exporter.scores == 0
    assert exporter.errors == [
        f"Langfuse refused a score at {capture_server.url}{SCORES}: "
        'HTTP 401: {"message": "Invalid credentials"}; no more scores were sent'
    ]
    assert len(capture_server.requests_to(SCORES)) == 1


def test_refused_traces_send_no_scores(capture_server: CaptureServer) -> None:
    capture_server.fail(TRACES, 403)
    exporter = export(LangfuseExporter(capture_server.url, PUBLIC, SECRET))
    assert exporter.trials == 0
    assert capture_server.requests_to(SCORES) == []
    assert len(exporter.errors) == 2


def test_a_redirect_is_not_followed(capture_server: CaptureServer) -> None:
    capture_server.fail(SCORES, 302, headers={"Location": capture_server.url + "/elsewhere"})
    exporter = export(LangfuseExporter(capture_server.url, PUBLIC, SECRET))
    assert "HTTP 302" in exporter.errors[0]
    assert [r.path for r in capture_server.requests] == [TRACES, SCORES]


def test_otlp_headers_meant_for_other_back_ends_stay_home(
    capture_server: CaptureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-honeycomb-team=HONEY-KEY")
    export(LangfuseExporter(capture_server.url, PUBLIC, SECRET))
    assert capture_server.requests
    assert all("x-honeycomb-team" not in r.headers for r in capture_server.requests)
    assert os.environ["OTEL_EXPORTER_OTLP_HEADERS"] == "x-honeycomb-team=HONEY-KEY"
