"""Captured calls show wherever a model call shows: `transcripts show`, reports' token and cost
totals, `--max-cost`, the OpenTelemetry, Langfuse and JSONL exports, `trialkit cache`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.capture.helpers import KEY, errors, run_trials
from tests.capture.test_capture import BASE, tool_agent
from tests.exporters._samples import RUN, SUITE, decode_spans
from tests.fakes.capture_server import CaptureServer
from tests.fakes.provider_server import ProviderServer, RoundTrip
from trialkit import Suite, Task, graders
from trialkit.cli.main import cli
from trialkit.exporters import JsonlExporter, LangfuseExporter, OtelExporter
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.store import Store
from trialkit.trial import Trial


def weather_suite(trials: int = 2) -> Suite:
    return Suite(
        id="weather",
        trials=trials,
        harness=tool_agent,
        tasks=[
            Task(id="oslo", input="Oslo", graders=[graders.tool_called("get_weather")]),
            Task(id="bern", input="Bern", graders=[graders.contains("sunny")]),
        ],
    )


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[str, list[Trial], Path]:
    """A stored run of the weather suite, recorded: (store URL, trials, cassette folder)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ProviderServer(default=RoundTrip()) as server:
        BASE["url"] = server.openai_base_url
        store = Store(url)
        try:
            _, trials, _ = run_trials(
                weather_suite(),
                store=store,
                cassette=Cassette(tmp_path / "cassette", CacheMode.RECORD),
            )
        finally:
            store.close()
    assert errors(trials) == []
    return url, trials, tmp_path / "cassette"


def test_transcripts_show_names_each_captured_call_and_tool(
    recorded: tuple[str, list[Trial], Path],
) -> None:
    url, trials, _ = recorded
    result = CliRunner().invoke(
        cli, ["transcripts", "show", f"{trials[0].run_id}/oslo#0", "--store", url]
    )
    assert result.exit_code == 0, result.output
    assert "/chat/completions → 200" in result.output
    assert "get_weather" in result.output and "sunny in Oslo" in result.output
    assert KEY not in result.output


def test_the_report_counts_captured_tokens_and_cost(
    recorded: tuple[str, list[Trial], Path],
) -> None:
    url, trials, _ = recorded
    result = CliRunner().invoke(
        cli, ["report", trials[0].run_id, "--format", "json", "--store", url]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    assert summary["cost_usd"] == pytest.approx(sum(t.cost_usd or 0 for t in trials))
    assert summary["cost_usd"] > 0
    assert sum(t.usage.total_tokens for t in trials) > 0


def test_max_cost_stops_on_what_captured_calls_cost(tmp_path: Path) -> None:
    with ProviderServer(default=RoundTrip()) as server:
        BASE["url"] = server.openai_base_url
        _, trials, _ = run_trials(weather_suite(trials=20), concurrency=1, max_cost=1e-9)
    assert 1 <= len(trials) < 40  # the first trial's calls spent the budget


def test_exports_carry_captured_calls(
    recorded: tuple[str, list[Trial], Path], tmp_path: Path
) -> None:
    _, trials, _ = recorded
    trial = next(t for t in trials if t.task_id == "oslo")
    with CaptureServer() as receiver:
        for exporter in (
            OtelExporter(receiver.url, include_content=True),
            LangfuseExporter(receiver.url, "pk-lf-test", "sk-lf-test-0123456789"),
        ):
            exporter.on_run_start(RUN, SUITE)
            exporter.on_trial(trial)
            exporter.on_run_end(RUN)
        spans = decode_spans(receiver.requests_to("/v1/traces")) + decode_spans(
            receiver.requests_to("/api/public/otel/v1/traces")
        )
    chats = [s for s in spans if s.name == "chat gpt-4o-mini"]
    assert len(chats) == 4  # two calls, in each of the two exports
    first = chats[0].attributes
    assert first["gen_ai.usage.input_tokens"] > 0
    assert first["http.response.status_code"] == 200
    assert first["url.full"].endswith("/chat/completions")
    inputs = json.loads(first["gen_ai.input.messages"])
    assert inputs == [{"role": "user", "parts": [{"type": "text", "content": "Oslo"}]}]
    assert any(s.name == "execute_tool get_weather" for s in spans)

    path = tmp_path / "trace.jsonl"
    jsonl = JsonlExporter(path)
    jsonl.on_run_start(RUN, SUITE)
    jsonl.on_trial(trial)
    jsonl.on_run_end(RUN)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    calls = [e for t in events for e in t.get("events", []) if e.get("type") == "model_call"]
    assert [c["request_messages"] for c in calls] == [1, 3]  # user; user, assistant, tool
    assert all(c["status"] == 200 and c["endpoint"].startswith("POST ") for c in calls)
    assert KEY not in path.read_text() and KEY not in repr(spans)  # the key was sent, not kept


def test_cache_commands_understand_captured_recordings(
    recorded: tuple[str, list[Trial], Path],
) -> None:
    _, _, cassette = recorded
    stats = CliRunner().invoke(cli, ["cache", "stats", str(cassette), "--json"])
    assert stats.exit_code == 0, stats.output
    data = json.loads(stats.output)
    assert data["models"]["openai/gpt-4o-mini"]["recordings"] == 8  # 2 tasks x 2 trials x 2
    verify = CliRunner().invoke(cli, ["cache", "verify", str(cassette)])
    assert verify.exit_code == 0, verify.output

    broken = next(cassette.glob("openai__gpt-4o-mini/*/*.json"))
    text = json.loads(broken.read_text())
    text["responses"][0]["response"]["status"] = "ok"
    broken.write_text(json.dumps(text))
    verify = CliRunner().invoke(cli, ["cache", "verify", str(cassette)])
    assert verify.exit_code != 0
    assert "status 'ok' is not an HTTP status" in verify.output

    prune = CliRunner().invoke(cli, ["cache", "prune", str(cassette), "--dry-run"])
    assert prune.exit_code == 0, prune.output
    assert "nothing to prune" in prune.output.lower() or "0 " in prune.output
