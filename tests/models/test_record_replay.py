"""Record a run against a real HTTP server through the official SDK, then replay it offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.provider_server import Echo, Fail, ProviderServer, Reply
from trialkit import Suite, Task, graders, run_sync
from trialkit.harness import recorded
from trialkit.models import RetryPolicy, get_model
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.report import Report

KEY = "sk-test-abcdefghijklmnopqrstuvwxyz0123"
FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05, timeout=5)


def suite_for(server: ProviderServer | str, *task_ids: str, trials: int = 3) -> Suite:
    """A suite against `server` (or its base URL, once it is stopped)."""
    url = server if isinstance(server, str) else server.openai_base_url
    model = get_model("openai/gpt-4o-mini", base_url=url, api_key=KEY)
    return Suite(
        id="capitals",
        kind="capability",
        trials=trials,
        model=model,
        tasks=[
            Task(id=t, input=f"Capital of {t}?", graders=[graders.contains("paris")])
            for t in task_ids
        ],
    )


def outputs(report: Report) -> dict[str, list[str | None]]:
    return {t.id: [r.output for r in t.results] for t in report.tasks}


def test_record_then_replay_offline_reproduces_every_trial(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    provider_server.script(Reply("Paris"), Reply("Lyon"), Reply("Paris, France"))
    suite = suite_for(provider_server, "france")
    recording = run_sync(
        suite, concurrency=1, cassette=Cassette(tmp_path, CacheMode.RECORD), retry=FAST
    )
    assert outputs(recording) == {"france": ["Paris", "Lyon", "Paris, France"]}
    assert recording.tasks[0].flaky
    calls = provider_server.request_count
    provider_server.stop()

    replay = run_sync(
        suite, concurrency=3, cassette=Cassette(tmp_path, CacheMode.REPLAY), retry=FAST
    )
    assert outputs(replay) == outputs(recording)
    assert [r.verdict for r in replay.tasks[0].results] == ["pass", "fail", "pass"]
    assert replay.summary.usage == recording.summary.usage
    assert replay.summary.cost_usd == pytest.approx(recording.summary.cost_usd)
    assert provider_server.request_count == calls


def test_a_replay_miss_is_an_error_naming_task_trial_and_model(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    url = provider_server.openai_base_url
    run_sync(suite_for(url, "france", trials=1), cassette=Cassette(tmp_path, CacheMode.RECORD))
    provider_server.stop()
    report = run_sync(
        suite_for(url, "france", "italy", trials=1),
        cassette=Cassette(tmp_path, CacheMode.REPLAY),
        retry=FAST,
    )
    assert report.task("france").errors == 0  # replayed: echoed, so it fails the check
    miss = report.task("italy").results[0]
    assert miss.verdict == "error"
    assert miss.error is not None
    assert miss.error.type == "CassetteMiss"
    for part in ("italy", "trial 0", "openai/gpt-4o-mini", "-", "+"):
        assert part in miss.error.message
    assert "Capital of italy?" in miss.error.message
    assert report.gate().exit_code == 3


def test_auto_records_only_what_is_missing(provider_server: ProviderServer, tmp_path: Path) -> None:
    provider_server.default = Echo()
    run_sync(
        suite_for(provider_server, "france", trials=2),
        cassette=Cassette(tmp_path, CacheMode.RECORD),
    )
    assert provider_server.request_count == 2
    run_sync(
        suite_for(provider_server, "france", "italy", trials=2),
        cassette=Cassette(tmp_path, CacheMode.AUTO),
    )
    assert provider_server.request_count == 4  # only italy's two trials went out
    url = provider_server.openai_base_url
    provider_server.stop()
    again = run_sync(
        suite_for(url, "france", "italy", trials=2), cassette=Cassette(tmp_path, CacheMode.REPLAY)
    )
    assert again.summary.errors == 0


def test_no_secret_reaches_the_cassette_or_the_store(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    provider_server.script(Reply("Paris"))
    db = tmp_path / "runs.db"
    run_sync(
        suite_for(provider_server, "france", trials=1),
        store=str(db),
        cassette=Cassette(tmp_path / "cassette", CacheMode.RECORD),
    )
    assert provider_server.last_request.api_key == KEY
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path


def test_transient_errors_are_retried_through_the_sdk(provider_server: ProviderServer) -> None:
    provider_server.script(Fail(429, retry_after=0.05), Fail(503), Reply("Paris"))
    report = run_sync(suite_for(provider_server, "france", trials=1), retry=FAST)
    result = report.tasks[0].results[0]
    assert result.verdict == "pass"
    assert provider_server.request_count == 3


def test_a_permanent_error_fails_fast(provider_server: ProviderServer) -> None:
    provider_server.script(Fail(404, "no such model"))
    report = run_sync(suite_for(provider_server, "france", trials=1), retry=FAST)
    error = report.tasks[0].results[0].error
    assert error is not None
    assert error.type == "ModelError"
    assert "HTTP 404" in error.message and "check the model name" in error.message
    assert provider_server.request_count == 1


def test_a_dead_endpoint_errors_within_the_retry_budget(tmp_path: Path) -> None:
    with ProviderServer() as server:
        suite = suite_for(server, "france", trials=1)
    report = run_sync(suite, retry=RetryPolicy(attempts=2, base_delay=0.01, timeout=1))
    error = report.tasks[0].results[0].error
    assert error is not None and "gave up after 2 attempts" in error.message


def test_usage_with_cache_tokens_and_cost(provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply(
            "Paris",
            usage={
                "prompt_tokens": 1000,
                "completion_tokens": 100,
                "total_tokens": 1100,
                "prompt_tokens_details": {"cached_tokens": 800},
            },
        )
    )
    report = run_sync(suite_for(provider_server, "france", trials=1))
    result = report.tasks[0].results[0]
    assert result.usage.input_tokens == 1000
    assert result.usage.cache_read_tokens == 800
    # gpt-4o-mini: 200 fresh in at $0.15/M, 800 cached at $0.075/M, 100 out at $0.60/M
    assert result.cost_usd == pytest.approx(200 * 0.15e-6 + 800 * 0.075e-6 + 100 * 0.6e-6)


def test_a_plain_function_harness_recorded_under_a_model_id(tmp_path: Path) -> None:
    calls: list[str] = []

    def agent(prompt: str) -> str:
        calls.append(prompt)
        return f"answer {len(calls)}"

    suite = Suite(
        id="s",
        trials=2,
        harness=recorded(agent, model="my-agent/v1"),
        tasks=[Task(id="t", input="hello")],
    )
    first = run_sync(suite, concurrency=1, cassette=Cassette(tmp_path, CacheMode.RECORD))
    assert outputs(first) == {"t": ["answer 1", "answer 2"]}
    second = run_sync(suite, concurrency=1, cassette=Cassette(tmp_path, CacheMode.REPLAY))
    assert outputs(second) == outputs(first)
    assert len(calls) == 2
    other = Suite(
        id="s",
        harness=recorded(agent, model="my-agent/v1"),
        tasks=[Task(id="new", input="something else")],
    )
    missed = run_sync(other, cassette=Cassette(tmp_path, CacheMode.REPLAY))
    error = missed.tasks[0].results[0].error
    assert error is not None and error.type == "CassetteMiss"
    assert "my-agent/v1" in error.message
