"""Model calls an agent makes with its own SDK client land in the trial's transcript and go
through the cassette: the real `openai` SDK against the fake provider on loopback."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import openai
import pytest

from tests.capture.helpers import KEY, errors, run_trials
from tests.fakes.provider_server import Fail, ProviderServer, Reply, RoundTrip
from trialkit import Suite, Task, graders
from trialkit.environments.workspace import Workspace
from trialkit.harness.base import TrialContext
from trialkit.models import get_model
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.store import Store
from trialkit.trial import Trial

BASE = {"url": "", "anthropic": ""}
"""The fake server's OpenAI base URL for the agents below (set by each test)."""

IMPORT_TIME_CLIENT = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key=KEY, max_retries=0)
"""A client made when the module is imported, before any run wraps anything."""


def ask(client: openai.OpenAI, prompt: str) -> str:
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
    )
    return answer.choices[0].message.content or ""


def sync_agent(prompt: str) -> str:
    """An agent as it runs in production: its own client, two model calls."""
    client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)
    first = ask(client, prompt)
    second = ask(client, f"again: {prompt}")
    client.close()
    return f"{first} / {second}"


SHARED: dict[str, openai.AsyncOpenAI] = {}


async def async_agent(prompt: str) -> str:
    """Every trial on one shared async client, so trials' calls interleave on it."""
    client = SHARED.setdefault(
        "client", openai.AsyncOpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)
    )
    answer = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": prompt}]
    )
    return answer.choices[0].message.content or ""


def suite(harness: object, *prompts: str, trials: int = 2, **extra: object) -> Suite:
    return Suite(
        id="capture",
        kind="capability",
        trials=trials,
        harness=harness,
        tasks=[
            Task(id=f"t{i}", input=prompt, graders=[graders.contains(prompt)])
            for i, prompt in enumerate(prompts)
        ],
        **extra,  # type: ignore[arg-type]
    )


def test_calls_of_an_unmodified_agent_are_recorded_then_replayed_offline(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    cassette = tmp_path / "cassette"
    report, trials, _ = run_trials(
        suite(sync_agent, "Paris", "Rome", trials=3),
        cassette=Cassette(cassette, CacheMode.RECORD),
    )
    assert errors(trials) == []
    assert report.summary.passed_tasks == 2
    for trial in trials:
        calls = trial.transcript.model_calls
        assert len(calls) == 2
        for call in calls:
            assert call.model == "openai/gpt-4o-mini"
            assert call.endpoint == f"POST {provider_server.openai_base_url}/chat/completions"
            assert call.status == 200
            assert call.role == "agent"
            assert call.response is not None and call.response["message"]["content"]
            assert call.usage.input_tokens > 0 and call.usage.output_tokens > 0
            assert call.cost_usd is not None and call.cost_usd > 0
            assert not call.replayed
        assert trial.usage.total_tokens == sum(c.usage.total_tokens for c in calls)
        assert trial.cost_usd == pytest.approx(sum(c.cost_usd or 0 for c in calls))
    assert report.summary.cost_usd is not None and report.summary.cost_usd > 0
    files = sorted(cassette.glob("openai__gpt-4o-mini/*/*.json"))
    assert len(files) == 4  # two tasks x two distinct requests; trials are entries inside
    recorded = provider_server.request_count
    provider_server.stop()

    again, replayed, _ = run_trials(
        suite(sync_agent, "Paris", "Rome", trials=3),
        cassette=Cassette(cassette, CacheMode.REPLAY),
        offline=True,
    )
    assert errors(replayed) == []
    assert [t.outcome.output for t in replayed] == [t.outcome.output for t in trials]
    assert [t.verdict for t in replayed] == [t.verdict for t in trials]
    assert all(c.replayed for t in replayed for c in t.transcript.model_calls)
    assert [t.usage for t in replayed] == [t.usage for t in trials]
    assert again.summary.cost_usd == pytest.approx(report.summary.cost_usd)
    assert provider_server.request_count == recorded


def test_a_replay_miss_is_the_trials_error_naming_task_trial_endpoint_and_model(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    cassette = Cassette(tmp_path, CacheMode.RECORD)
    run_trials(suite(sync_agent, "Paris", trials=1), cassette=cassette)
    provider_server.stop()

    _, trials, _ = run_trials(
        suite(sync_agent, "Paris!", trials=1), cassette=Cassette(tmp_path, CacheMode.REPLAY)
    )
    (trial,) = trials
    assert trial.verdict == "error"
    assert trial.error is not None
    assert trial.error.type == "CassetteMiss"
    message = trial.error.message
    assert "task 't0', trial 0, model openai/gpt-4o-mini" in message
    assert "/chat/completions" in message
    assert '"content": "Paris"' in message and '"content": "Paris!"' in message  # the diff
    assert "Connection error" not in message


def test_interleaved_trials_on_one_client_are_attributed_to_their_own_trials(
    provider_server: ProviderServer,
) -> None:
    BASE["url"] = provider_server.openai_base_url
    SHARED.clear()
    prompts = [f"city {n}" for n in range(6)]
    _, trials, _ = run_trials(
        suite(async_agent, *prompts, trials=2),
        concurrency=12,
        after=lambda: SHARED.pop("client").close(),
    )
    assert errors(trials) == []
    for trial in trials:
        (call,) = trial.transcript.model_calls
        prompt = prompts[int(trial.task_id[1:])]
        assert call.request["messages"] == [{"role": "user", "content": prompt}]


def threaded_agent(prompt: str) -> str:
    """Calls from a plain thread and from an executor's worker, as some agents do."""
    client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)
    found: list[str] = []
    thread = threading.Thread(target=lambda: found.append(ask(client, f"{prompt} (thread)")))
    thread.start()
    thread.join(10)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        found.append(pool.submit(ask, client, f"{prompt} (pool)").result(10))
    client.close()
    return " ".join(found)


def test_calls_from_threads_the_agent_starts_are_the_trials(
    provider_server: ProviderServer,
) -> None:
    BASE["url"] = provider_server.openai_base_url
    _, trials, _ = run_trials(suite(threaded_agent, "Oslo", "Bern", trials=2), concurrency=4)
    assert errors(trials) == []
    for trial in trials:
        prompt = trial.outcome.output.split(" ")[0]  # type: ignore[union-attr]
        contents = sorted(c.request["messages"][0]["content"] for c in trial.transcript.model_calls)
        assert contents == [f"{prompt} (pool)", f"{prompt} (thread)"]


def test_calls_outside_any_trial_are_never_attributed_to_one(
    provider_server: ProviderServer,
) -> None:
    BASE["url"] = provider_server.openai_base_url
    stop = threading.Event()
    client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)

    def background() -> None:  # like a trace exporter: started before the run, runs during it
        for _ in range(200):
            if stop.wait(0.01):
                return
            ask(client, "background")

    exporter = threading.Thread(target=background, daemon=True)
    exporter.start()
    try:
        _, trials, _ = run_trials(suite(sync_agent, "Lima", trials=3), concurrency=3)
    finally:
        stop.set()
        exporter.join(10)
        client.close()
    assert errors(trials) == []
    for trial in trials:
        contents = [c.request["messages"][0]["content"] for c in trial.transcript.model_calls]
        assert contents == ["Lima", "again: Lima"]


def import_time_agent(prompt: str) -> str:
    IMPORT_TIME_CLIENT.base_url = BASE["url"]  # type: ignore[assignment]
    return ask(IMPORT_TIME_CLIENT, prompt)


def test_a_client_made_at_import_time_is_captured(provider_server: ProviderServer) -> None:
    BASE["url"] = provider_server.openai_base_url
    _, trials, _ = run_trials(suite(import_time_agent, "Quito", trials=1))
    assert errors(trials) == []
    assert len(trials[0].transcript.model_calls) == 1


def test_calls_through_trialkits_own_models_are_not_counted_twice(
    provider_server: ProviderServer,
) -> None:
    model = get_model("openai/gpt-4o-mini", base_url=provider_server.openai_base_url, api_key=KEY)
    chat = Suite(
        id="chat",
        trials=2,
        model=model,
        tasks=[Task(id="t", input="Paris", graders=[graders.contains("paris")])],
    )
    _, trials, _ = run_trials(chat)
    assert errors(trials) == []
    for trial in trials:
        (call,) = trial.transcript.model_calls
        assert call.endpoint is None  # recorded by the model layer, not by the hook


def test_capture_off_records_nothing_and_a_record_run_says_so(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    folder = tmp_path / "cassette"
    _, trials, runner = run_trials(
        suite(sync_agent, "Paris", trials=1),
        capture=False,
        cassette=Cassette(folder, CacheMode.RECORD),
    )
    assert errors(trials) == []
    assert trials[0].transcript.model_calls == []
    assert not folder.exists()
    (notice,) = runner.notices
    assert "recorded nothing" in notice and "--no-capture" in notice


def other_endpoint_agent(prompt: str) -> str:
    with httpx2.Client() as client:
        listing = client.get(f"{BASE['url']}/models")
        posted = client.post(f"{BASE['url']}/files", json={"model": "not-a-call"})
    return f"{prompt} {listing.status_code} {posted.status_code}"


def test_requests_to_other_endpoints_pass_untouched_and_unrecorded(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    _, trials, _ = run_trials(
        suite(other_endpoint_agent, "Paris", trials=1),
        cassette=Cassette(tmp_path, CacheMode.REPLAY),
    )
    assert errors(trials) == []
    assert trials[0].transcript.model_calls == []
    assert trials[0].outcome.output == "Paris 404 404"  # the server's own answers, in replay
    assert [r.path for r in provider_server.requests] == ["/v1/files"]  # it logs only POSTs


def far_agent(prompt: str) -> str:
    client = openai.OpenAI(base_url="http://192.0.2.10:9/v1", api_key=KEY, max_retries=3)
    try:
        return ask(client, prompt)
    except openai.APIError as exc:  # an agent that swallows the error must not pass for it
        return f"{prompt}: {exc}"


def test_offline_refuses_a_request_off_this_machine_without_sending_it() -> None:
    started = time.perf_counter()
    _, trials, _ = run_trials(suite(far_agent, "Paris", trials=1), offline=True)
    (trial,) = trials
    assert trial.verdict == "error"
    assert trial.error is not None and trial.error.type == "OfflineRefused"
    assert "192.0.2.10" in trial.error.message and "task 't0'" in trial.error.message
    assert time.perf_counter() - started < 5  # refused at once: no connection, no SDK retries


def test_retries_the_sdk_makes_are_counted_on_the_call(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url

    def retrying_agent(prompt: str) -> str:
        client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=2)
        client._client.timeout = httpx2.Timeout(5)
        try:
            return ask(client, prompt)
        finally:
            client.close()

    provider_server.script(Fail(429, retry_after=0), Fail(503, retry_after=0), Reply("Paris"))
    _, trials, _ = run_trials(
        suite(retrying_agent, "Paris", trials=1), cassette=Cassette(tmp_path, CacheMode.RECORD)
    )
    assert errors(trials) == []
    (call,) = trials[0].transcript.model_calls
    assert (call.retries, call.status, call.error) == (2, 200, None)
    provider_server.stop()
    _, replayed, _ = run_trials(
        suite(retrying_agent, "Paris", trials=1), cassette=Cassette(tmp_path, CacheMode.REPLAY)
    )
    assert errors(replayed) == []  # the failed attempts were not recorded: occurrence 0 is
    assert replayed[0].outcome.output == "Paris"


def workspace_agent(prompt: str, ctx: TrialContext) -> str:
    client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)
    try:
        return ask(client, f"{prompt} in {ctx.world.path}")
    finally:
        client.close()


def test_the_workspace_path_is_normalised_in_keys_and_mapped_back_in_answers(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    folder = tmp_path / "cassette"
    spaced = suite(workspace_agent, "Paris", trials=2, environment=Workspace())
    _, recorded, _ = run_trials(spaced, cassette=Cassette(folder, CacheMode.RECORD))
    assert errors(recorded) == []
    text = "".join(p.read_text() for p in folder.rglob("*.json"))
    assert "{{trialkit.workspace}}" in text
    assert not any(str(t.outcome.output).split(" in ")[1] in text for t in recorded)
    provider_server.stop()

    _, replayed, _ = run_trials(spaced, cassette=Cassette(folder, CacheMode.REPLAY))
    assert errors(replayed) == []
    for trial in replayed:  # the echo names this trial's own folder, not the recorded one
        assert "{{" not in str(trial.outcome.output)
        assert str(trial.outcome.output).startswith("Paris in /")
    assert {t.outcome.output for t in replayed}.isdisjoint({t.outcome.output for t in recorded})


def test_no_key_reaches_the_cassette_the_store_or_the_reports(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        report, trials, _ = run_trials(
            suite(sync_agent, "Paris", trials=2),
            cassette=Cassette(tmp_path / "cassette", CacheMode.RECORD),
            store=store,
        )
    finally:
        store.close()
    assert provider_server.last_request.api_key == KEY  # it was sent: the check is real
    (tmp_path / "report.json").write_text(report.to_json())
    (tmp_path / "report.html").write_text(report.to_html())
    scanned = 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert KEY.encode() not in data, path
            assert b"authorization" not in data.lower(), path
            scanned += 1
    assert scanned >= 5  # recordings, the store (and its WAL), the reports
    for trial in trials:
        assert KEY not in trial.model_dump_json()


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def tool_agent(prompt: str) -> str:
    """A hand-written tool loop on the SDK: the model asks for the tool, the agent runs it."""
    client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)
    messages: list[dict[str, object]] = [{"role": "user", "content": prompt}]
    try:
        for _ in range(3):
            answer = client.chat.completions.create(
                model="gpt-4o-mini",
                messages=messages,  # type: ignore[arg-type]
                tools=[WEATHER_TOOL],  # type: ignore[list-item]
            )
            message = answer.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                city = json.loads(call.function.arguments)["city"]  # type: ignore[union-attr]
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": f"sunny in {city}"}
                )
    finally:
        client.close()
    return "no answer"


def test_the_tools_the_model_asked_for_are_in_the_transcript_with_their_results(
    tmp_path: Path,
) -> None:
    with ProviderServer(default=RoundTrip()) as server:
        BASE["url"] = server.openai_base_url
        graded = Suite(
            id="tools",
            trials=2,
            harness=tool_agent,
            tasks=[
                Task(
                    id="weather",
                    input="Oslo",
                    graders=[graders.tool_called("get_weather", {"city": "Oslo"})],
                )
            ],
        )
        report, trials, _ = run_trials(graded, cassette=Cassette(tmp_path, CacheMode.RECORD))
    assert errors(trials) == [] and report.summary.passed_tasks == 1
    for trial in trials:
        (call,) = trial.transcript.tool_calls
        assert (call.name, call.arguments, call.result) == (
            "get_weather",
            {"city": "Oslo"},
            "sunny in Oslo",
        )
        assert len(trial.transcript.model_calls) == 2
        assert trial.outcome.output == "The tool answered: sunny in Oslo"
    _, replayed, _ = run_trials(graded, cassette=Cassette(tmp_path, CacheMode.REPLAY))
    assert [t.verdict for t in replayed] == ["pass", "pass"]

    def seen(trial: Trial) -> list[tuple[str, str, dict[str, object], str | None]]:
        return [(c.id, c.name, c.arguments, c.result) for c in trial.transcript.tool_calls]

    assert [seen(t) for t in replayed] == [seen(t) for t in trials]


def embedding_agent(prompt: str) -> str:
    client = openai.OpenAI(base_url=BASE["url"], api_key=KEY, max_retries=0)
    try:
        vectors = client.embeddings.create(model="text-embedding-3-small", input=[prompt, "x"])
    finally:
        client.close()
    return f"{prompt}: {len(vectors.data)} vectors"


def test_embeddings_are_captured_for_their_usage(provider_server: ProviderServer) -> None:
    BASE["url"] = provider_server.openai_base_url
    _, trials, _ = run_trials(suite(embedding_agent, "Paris", trials=1))
    assert errors(trials) == []
    (call,) = trials[0].transcript.model_calls
    assert call.model == "openai/text-embedding-3-small"
    assert call.usage.input_tokens > 0 and call.usage.output_tokens == 0
    assert call.cost_usd is not None


def beta_agent(prompt: str) -> str:
    """Posts to /v1/messages?beta=true, as Claude Code does."""
    import anthropic

    client = anthropic.Anthropic(base_url=BASE["anthropic"], api_key=KEY, max_retries=0)
    try:
        answer = client.beta.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=50,
            messages=[{"role": "user", "content": prompt}],
            metadata={"user_id": f"session-{time.monotonic_ns()}"},  # differs every run
            extra_query={"beta": "true"},
        )
    finally:
        client.close()
    return "".join(block.text for block in answer.content if block.type == "text")


def test_anthropic_beta_requests_are_captured_and_a_per_run_user_id_still_replays(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["anthropic"] = provider_server.anthropic_base_url
    _, trials, _ = run_trials(
        suite(beta_agent, "Paris", trials=2), cassette=Cassette(tmp_path, CacheMode.RECORD)
    )
    assert errors(trials) == []
    assert provider_server.last_request.query == "beta=true"
    (call,) = trials[0].transcript.model_calls
    assert call.model == "anthropic/claude-sonnet-4-5" and "?" not in (call.endpoint or "")
    assert "metadata" not in call.request  # metadata.user_id is volatile: not in the key
    provider_server.stop()
    _, replayed, _ = run_trials(
        suite(beta_agent, "Paris", trials=2), cassette=Cassette(tmp_path, CacheMode.REPLAY)
    )
    assert errors(replayed) == []
    assert [t.outcome.output for t in replayed] == [t.outcome.output for t in trials]


def test_an_http_module_imported_after_the_run_started_is_wrapped_too() -> None:
    code = (
        "import sys, trialkit.capture.hook as hook\n"
        "hook.install()\n"
        "assert 'httpx2' not in sys.modules  # nothing is loaded for nothing\n"
        "import httpx2\n"
        "assert httpx2.Client.send._trialkit_capture\n"
        "assert httpx2.AsyncClient.send._trialkit_capture\n"
        "hook.install()  # idempotent: one finder, one wrap\n"
        "assert sum(type(f).__name__ == '_WrapOnImport' for f in sys.meta_path) == 1\n"
        "assert not hasattr(httpx2.Client.send.__wrapped__, '_trialkit_capture')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def raw_socket_agent(prompt: str) -> str:
    """No HTTP client trialkit wraps: the standard library, straight to another host."""
    import urllib.request

    seen = []
    for attempt in (
        lambda: urllib.request.urlopen("http://192.0.2.10:9/v1/chat/completions", timeout=2),
        lambda: socket.create_connection(("192.0.2.11", 9), timeout=2),
        lambda: socket.getaddrinfo("example.invalid", 80),
    ):
        try:
            attempt()
        except OSError as exc:  # an agent that shrugs it off must still not pass
            seen.append(type(exc).__name__)
    return f"{prompt} {seen}"


def test_offline_refuses_any_library_connecting_elsewhere(
    provider_server: ProviderServer,
) -> None:
    started = time.perf_counter()
    _, trials, _ = run_trials(suite(raw_socket_agent, "Paris", trials=1), offline=True)
    (trial,) = trials
    assert trial.verdict == "error"
    assert trial.error is not None and trial.error.type == "OfflineRefused"
    assert "192.0.2.10" in trial.error.message
    assert time.perf_counter() - started < 5
    # a connection to this machine stays allowed
    BASE["url"] = provider_server.openai_base_url
    _, fine, _ = run_trials(suite(sync_agent, "Paris", trials=1), offline=True)
    assert errors(fine) == []


def provider_host_agent(prompt: str) -> str:
    """The same agent, configured for its real provider's host, as it is in production."""
    client = openai.OpenAI(base_url="https://api.openai.com/v1", api_key=KEY, max_retries=0)
    try:
        first = ask(client, prompt)
        return f"{first} / {ask(client, f'again: {prompt}')}"
    finally:
        client.close()


def test_offline_lets_a_replay_answer_requests_for_another_host(
    provider_server: ProviderServer, tmp_path: Path
) -> None:
    BASE["url"] = provider_server.openai_base_url
    _, recorded, _ = run_trials(
        suite(sync_agent, "Paris", trials=2), cassette=Cassette(tmp_path, CacheMode.RECORD)
    )
    _, replayed, _ = run_trials(
        suite(provider_host_agent, "Paris", trials=2),
        cassette=Cassette(tmp_path, CacheMode.REPLAY),
        offline=True,
    )
    assert errors(replayed) == []  # answered here: nothing would leave, nothing is refused
    assert [t.outcome.output for t in replayed] == [t.outcome.output for t in recorded]
    _, auto, _ = run_trials(
        suite(provider_host_agent, "Rome", trials=1),
        cassette=Cassette(tmp_path, CacheMode.AUTO),
        offline=True,
    )
    assert auto[0].error is not None and auto[0].error.type == "OfflineRefused"
    assert "api.openai.com" in auto[0].error.message
    (call,) = auto[0].transcript.model_calls  # the refused call, in the transcript
    assert call.error is not None and "--offline refused" in call.error
