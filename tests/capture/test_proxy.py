"""The model proxy on its own: the real anthropic and openai SDKs, pointed at a trial's base
URLs, reach the fake provider through it, and each call lands in that trial's transcript (and
cassette) as if the SDK had been the trial's own."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import anthropic
import anyio
import httpx
import openai
import pytest
import zstandard

from tests.capture.helpers import KEY
from tests.fakes.provider_server import Echo, Hold, ProviderServer, Reply
from trialkit.capture.proxy import ModelProxy, ProxyTrial, shared_proxy
from trialkit.models.cassette import CacheMode, Cassette, CassetteMiss
from trialkit.models.context import ModelSettings
from trialkit.transcript import ModelCall, TranscriptRecorder

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o-mini"
MESSAGE = {"model": CLAUDE, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def proxy() -> Iterator[ModelProxy]:
    proxy = ModelProxy().start()
    try:
        yield proxy
    finally:
        proxy.stop()


def open_trial(
    proxy: ModelProxy,
    server: ProviderServer | None,
    *,
    task: str = "t1",
    index: int = 0,
    cassette: Cassette | None = None,
    upstreams: dict[str, str] | None = None,
) -> ProxyTrial:
    recorder = TranscriptRecorder(task_id=task, trial_index=index)
    if upstreams is None:
        assert server is not None
        upstreams = {"anthropic": server.anthropic_base_url, "openai": server.openai_base_url}
    return proxy.open_trial(recorder, ModelSettings(cassette=cassette), upstreams)


def anthropic_client(trial: ProxyTrial) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=trial.anthropic_base_url, api_key=KEY, max_retries=0)


def openai_client(trial: ProxyTrial) -> openai.OpenAI:
    return openai.OpenAI(base_url=trial.openai_base_url, api_key=KEY, max_retries=0)


def text_of(message: anthropic.types.Message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def calls_of(trial: ProxyTrial) -> list[ModelCall]:
    """The trial's captured calls, once the proxy passed on all it was passing on (a call is
    complete in the transcript when the proxy is done with it, maybe after the client is)."""
    assert trial.settle(timeout=10)
    return trial.recorder.transcript.model_calls


def transcript_json(trial: ProxyTrial) -> str:
    assert trial.settle(timeout=10)
    return trial.recorder.transcript.model_dump_json()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# -- the SDKs through the proxy ---------------------------------------------------------------


def test_anthropic_sdk_sync_calls_are_answered_and_captured(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 100}
    provider_server.script(Reply("Bonjour", usage=usage), Reply("Salut", usage=usage))
    trial = open_trial(proxy, provider_server)
    with anthropic_client(trial) as client:
        whole = client.messages.create(**MESSAGE)  # type: ignore[call-overload]
        with client.messages.stream(**MESSAGE) as stream:  # type: ignore[arg-type]
            streamed = stream.get_final_message()
    assert (text_of(whole), text_of(streamed)) == ("Bonjour", "Salut")
    assert streamed.usage.output_tokens == 100

    calls = calls_of(trial)
    assert len(calls) == 2
    for call, text in zip(calls, ["Bonjour", "Salut"], strict=True):
        assert call.endpoint == f"POST {provider_server.url}/v1/messages"
        assert call.model == f"anthropic/{CLAUDE}"
        assert call.status == 200
        assert call.role == "agent"
        assert call.error is None and not call.replayed
        assert call.response is not None and call.response["message"]["content"] == text
        assert (call.usage.input_tokens, call.usage.output_tokens) == (1000, 100)
        assert call.cost_usd == pytest.approx(0.0045)
    assert trial.recorder.transcript.usage.total_tokens == 2200

    assert [r.api_key for r in provider_server.requests] == [KEY, KEY]  # as the SDK sent it
    assert [r.path for r in provider_server.requests] == ["/v1/messages"] * 2
    assert KEY not in transcript_json(trial)
    assert trial.settle(timeout=5)


@pytest.mark.anyio
async def test_anthropic_sdk_async_calls_are_answered_and_captured(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    trial = open_trial(proxy, provider_server)
    client = anthropic.AsyncAnthropic(base_url=trial.anthropic_base_url, api_key=KEY, max_retries=0)
    async with client:
        message = {**MESSAGE, "messages": [{"role": "user", "content": "async whole"}]}
        whole = await client.messages.create(**message)  # type: ignore[call-overload]
        message = {**MESSAGE, "messages": [{"role": "user", "content": "async streamed"}]}
        pieces = []
        stream = await client.messages.create(**message, stream=True)  # type: ignore[call-overload]
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                pieces.append(event.delta.text)
    assert text_of(whole) == "async whole"
    assert "".join(pieces) == "async streamed"
    calls = calls_of(trial)
    assert [c.response["message"]["content"] for c in calls if c.response] == [
        "async whole",
        "async streamed",
    ]
    assert all(c.endpoint == f"POST {provider_server.url}/v1/messages" for c in calls)
    assert all(c.usage.output_tokens > 0 and (c.cost_usd or 0) > 0 for c in calls)
    assert KEY not in transcript_json(trial)


def test_openai_sdk_responses_and_chat_are_answered_and_captured(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    trial = open_trial(proxy, provider_server)
    with openai_client(trial) as client:
        whole = client.responses.create(model=GPT, input="responses whole")
        with client.responses.stream(model=GPT, input="responses streamed") as stream:
            streamed = stream.get_final_response()
        chunks = client.chat.completions.create(
            model=GPT,
            messages=[{"role": "user", "content": "chat streamed"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chat = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert (whole.output_text, streamed.output_text, chat) == (
        "responses whole",
        "responses streamed",
        "chat streamed",
    )

    calls = calls_of(trial)
    base = provider_server.openai_base_url
    assert [c.endpoint for c in calls] == [
        f"POST {base}/responses",
        f"POST {base}/responses",
        f"POST {base}/chat/completions",
    ]
    assert [c.response["message"]["content"] for c in calls if c.response] == [
        "responses whole",
        "responses streamed",
        "chat streamed",
    ]
    for call in calls:
        assert call.model == f"openai/{GPT}"
        assert call.status == 200 and call.error is None
        assert call.usage.input_tokens > 0 and call.usage.output_tokens > 0
        assert call.cost_usd is not None and call.cost_usd > 0
    assert [r.path for r in provider_server.requests] == [
        "/v1/responses",
        "/v1/responses",
        "/v1/chat/completions",
    ]
    assert {r.headers["authorization"] for r in provider_server.requests} == {f"Bearer {KEY}"}
    assert KEY not in transcript_json(trial)


def test_the_path_after_the_prefix_and_the_query_reach_the_upstream(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    trial = open_trial(proxy, provider_server)
    answer = httpx.post(f"{trial.anthropic_base_url}/v1/messages?beta=true", json=MESSAGE)
    assert answer.status_code == 200
    request = provider_server.last_request
    assert (request.path, request.query) == ("/v1/messages", "beta=true")
    assert request.headers["accept-encoding"] == "identity"
    assert request.headers["host"] == provider_server.url.removeprefix("http://")
    (call,) = calls_of(trial)
    assert call.endpoint == f"POST {provider_server.url}/v1/messages"  # no query

    answer = httpx.post(
        f"{trial.openai_base_url}/chat/completions?api-version=2024-10-21&x=1",
        json={"model": GPT, "messages": [{"role": "user", "content": "q"}]},
    )
    assert answer.status_code == 200
    request = provider_server.last_request
    assert (request.path, request.query) == ("/v1/chat/completions", "api-version=2024-10-21&x=1")
    assert calls_of(trial)[-1].endpoint == (
        f"POST {provider_server.openai_base_url}/chat/completions"
    )


# -- what the proxy answers itself ------------------------------------------------------------


def test_head_is_answered_locally(proxy: ModelProxy, provider_server: ProviderServer) -> None:
    trial = open_trial(proxy, provider_server)
    for url in (trial.anthropic_base_url, trial.openai_base_url, f"{trial.openai_base_url}/x"):
        assert httpx.head(url).status_code == 200
    assert provider_server.connections == 0
    assert calls_of(trial) == []


def test_requests_without_a_live_token_are_refused(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    trial = open_trial(proxy, provider_server)
    root = f"http://127.0.0.1:{proxy.port}"
    wrong = trial.anthropic_base_url.replace(trial.token, "not-" + trial.token)
    for url in (
        f"{wrong}/v1/messages",
        f"{root}/v1/messages",
        f"{root}/trialkit/",
        f"{root}/trialkit//anthropic/v1/messages",
    ):
        answer = httpx.post(url, json=MESSAGE)
        assert answer.status_code == 403, url
        assert answer.headers["x-should-retry"] == "false"
        assert "token" in answer.json()["error"]["message"]
    assert httpx.head(f"{wrong}").status_code == 403
    assert proxy.refused == 5

    with anthropic_client(trial) as client:
        client.messages.create(**MESSAGE)  # type: ignore[call-overload]
    assert provider_server.connections == 1  # the live trial's call, nothing else
    trial.close()
    with pytest.raises(anthropic.PermissionDeniedError), anthropic_client(trial) as client:
        client.messages.create(**MESSAGE)  # type: ignore[call-overload]
    assert proxy.refused == 6
    assert provider_server.request_count == 1
    assert len(calls_of(trial)) == 1


def test_an_unknown_family_is_not_found(proxy: ModelProxy, provider_server: ProviderServer) -> None:
    trial = open_trial(proxy, provider_server)
    answer = httpx.post(f"{trial.base}/gemini/v1/models", json=MESSAGE)
    assert answer.status_code == 404
    assert "gemini" in answer.json()["error"]["message"]
    assert provider_server.connections == 0


# -- compressed request bodies ----------------------------------------------------------------

BODY = json.dumps(MESSAGE).encode()


@pytest.mark.parametrize(
    ("coding", "compressed"),
    [
        ("gzip", gzip.compress(BODY)),
        ("x-gzip", gzip.compress(BODY)),
        ("deflate", zlib.compress(BODY)),
        ("deflate", zlib.compress(BODY, wbits=-zlib.MAX_WBITS)),  # raw deflate
        ("zstd", zstandard.ZstdCompressor().compress(BODY)),
        ("deflate, gzip", gzip.compress(zlib.compress(BODY))),  # applied in order
        ("identity", BODY),
    ],
)
def test_compressed_request_bodies_reach_the_upstream_decoded(
    proxy: ModelProxy, provider_server: ProviderServer, coding: str, compressed: bytes
) -> None:
    trial = open_trial(proxy, provider_server)
    answer = httpx.post(
        f"{trial.anthropic_base_url}/v1/messages",
        content=compressed,
        headers={"content-encoding": coding, "content-type": "application/json", "x-api-key": KEY},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["content"][0]["text"] == "hi"
    request = provider_server.last_request
    assert request.body == BODY
    assert request.headers["x-api-key"] == KEY
    assert "content-encoding" not in request.headers
    assert request.headers["content-length"] == str(len(BODY))
    (call,) = calls_of(trial)
    assert call.request["messages"] == MESSAGE["messages"]
    assert call.status == 200
    assert KEY not in transcript_json(trial)


@pytest.mark.parametrize(
    ("coding", "compressed"),
    [
        ("gzip", gzip.compress(BODY[:20]) + gzip.compress(BODY[20:])),
        (
            "zstd",
            zstandard.ZstdCompressor().compress(BODY[:20])
            + zstandard.ZstdCompressor().compress(BODY[20:]),
        ),
    ],
    ids=["gzip-members", "zstd-frames"],
)
def test_a_body_of_several_gzip_members_or_zstd_frames_is_decoded_whole(
    proxy: ModelProxy, provider_server: ProviderServer, coding: str, compressed: bytes
) -> None:
    trial = open_trial(proxy, provider_server)
    answer = httpx.post(
        f"{trial.anthropic_base_url}/v1/messages",
        content=compressed,
        headers={"content-encoding": coding, "content-type": "application/json"},
    )
    assert provider_server.requests and provider_server.last_request.body == BODY
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("coding", "body"),
    [
        ("compress", BODY),
        ("gzip", BODY),  # says gzip, is not
        ("gzip, snappy", gzip.compress(BODY)),
        ("br", BODY),  # brotli is not installed here
    ],
)
def test_a_body_the_proxy_cannot_decode_is_refused_with_415(
    proxy: ModelProxy, provider_server: ProviderServer, coding: str, body: bytes
) -> None:
    trial = open_trial(proxy, provider_server)
    answer = httpx.post(
        f"{trial.anthropic_base_url}/v1/messages",
        content=body,
        headers={"content-encoding": coding, "content-type": "application/json"},
    )
    assert answer.status_code == 415
    assert answer.json()["error"]["type"] == "trialkit_proxy"
    assert provider_server.connections == 0
    assert calls_of(trial) == []


# -- cassettes ----------------------------------------------------------------------------------


def test_record_then_replay_without_the_upstream(
    proxy: ModelProxy, provider_server: ProviderServer, tmp_path: Path
) -> None:
    folder = tmp_path / "cassette"
    recording = open_trial(proxy, provider_server, cassette=Cassette(folder, CacheMode.RECORD))
    with anthropic_client(recording) as client:
        whole = client.messages.create(**MESSAGE)  # type: ignore[call-overload]
        with client.messages.stream(**MESSAGE) as stream:  # type: ignore[arg-type]
            streamed = stream.get_final_message()
    assert recording.settle(timeout=10)  # the answers are on disk once the proxy is done
    assert len(list(folder.rglob("*.json"))) == 2  # "stream": true is in the key
    assert all(KEY not in path.read_text() for path in folder.rglob("*.json"))
    recorded = [c.response for c in calls_of(recording)]
    provider_server.reset()
    upstreams = {"anthropic": provider_server.url, "openai": provider_server.openai_base_url}

    def replay() -> tuple[ProxyTrial, anthropic.types.Message, anthropic.types.Message]:
        cassette = Cassette(folder, CacheMode.REPLAY)
        trial = open_trial(proxy, None, cassette=cassette, upstreams=upstreams)
        with anthropic_client(trial) as client:
            again = client.messages.create(**MESSAGE)  # type: ignore[call-overload]
            with client.messages.stream(**MESSAGE) as stream:  # type: ignore[arg-type]
                again_streamed = stream.get_final_message()
        return trial, again, again_streamed

    trial, again, again_streamed = replay()
    assert again.model_dump() == whole.model_dump()
    assert again_streamed.model_dump() == streamed.model_dump()
    assert provider_server.connections == 0
    calls = calls_of(trial)
    assert all(c.replayed for c in calls)
    assert [c.response for c in calls] == recorded
    assert trial.recorder.fatal is None

    provider_server.stop()
    trial, again, again_streamed = replay()
    assert again.model_dump() == whole.model_dump()
    assert again_streamed.model_dump() == streamed.model_dump()
    assert trial.recorder.fatal is None


def test_a_replay_miss_is_refused_and_names_the_task(
    proxy: ModelProxy, provider_server: ProviderServer, tmp_path: Path
) -> None:
    folder = tmp_path / "cassette"
    recording = open_trial(proxy, provider_server, cassette=Cassette(folder, CacheMode.RECORD))
    with anthropic_client(recording) as client:
        client.messages.create(**MESSAGE)  # type: ignore[call-overload]
    provider_server.reset()

    trial = open_trial(
        proxy, provider_server, task="capitals", cassette=Cassette(folder, CacheMode.REPLAY)
    )
    changed = {**MESSAGE, "messages": [{"role": "user", "content": "hi there"}]}
    with pytest.raises(anthropic.BadRequestError) as raised, anthropic_client(trial) as client:
        client.messages.create(**changed)  # type: ignore[call-overload]
    assert raised.value.status_code == 400
    assert isinstance(trial.recorder.fatal, CassetteMiss)
    assert trial.recorder.fatal.task_id == "capitals"
    assert "capitals" in str(trial.recorder.fatal)
    assert provider_server.connections == 0
    (call,) = calls_of(trial)
    assert call.error is not None and not call.replayed


OTHER_REQUESTS = [("GET", "anthropic", "/v1/models"), ("GET", "openai", "/models")]


@pytest.mark.parametrize(("method", "family", "path"), OTHER_REQUESTS)
def test_in_replay_other_requests_get_a_404_status_locally(
    proxy: ModelProxy,
    provider_server: ProviderServer,
    tmp_path: Path,
    method: str,
    family: str,
    path: str,
) -> None:
    trial = open_trial(proxy, provider_server, cassette=Cassette(tmp_path, CacheMode.REPLAY))
    base = trial.anthropic_base_url if family == "anthropic" else trial.openai_base_url
    with httpx.Client(timeout=5) as client, client.stream(method, f"{base}{path}") as answer:
        assert answer.status_code == 404
        assert answer.headers["x-should-retry"] == "false"
    assert provider_server.connections == 0
    assert trial.recorder.fatal is None


@pytest.mark.parametrize(("method", "family", "path"), OTHER_REQUESTS)
def test_in_replay_other_requests_get_a_whole_404_answer(
    proxy: ModelProxy,
    provider_server: ProviderServer,
    tmp_path: Path,
    method: str,
    family: str,
    path: str,
) -> None:
    trial = open_trial(proxy, provider_server, cassette=Cassette(tmp_path, CacheMode.REPLAY))
    base = trial.anthropic_base_url if family == "anthropic" else trial.openai_base_url
    answer = httpx.request(method, f"{base}{path}", timeout=5)
    assert answer.status_code == 404
    assert "nothing goes upstream" in answer.json()["error"]["message"]
    assert provider_server.connections == 0


def test_in_replay_the_sdk_reads_other_requests_as_not_found(
    proxy: ModelProxy, provider_server: ProviderServer, tmp_path: Path
) -> None:
    trial = open_trial(proxy, provider_server, cassette=Cassette(tmp_path, CacheMode.REPLAY))
    with pytest.raises(openai.NotFoundError), openai_client(trial) as client:
        client.models.list()
    assert provider_server.connections == 0


# -- failures and load --------------------------------------------------------------------------


def test_an_upstream_that_is_down_is_a_502(proxy: ModelProxy) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    trial = open_trial(proxy, None, upstreams={"anthropic": down, "openai": f"{down}/v1"})
    answer = httpx.post(f"{trial.anthropic_base_url}/v1/messages", json=MESSAGE)
    assert answer.status_code == 502
    assert down in answer.json()["error"]["message"]
    with pytest.raises(openai.InternalServerError) as raised, openai_client(trial) as client:
        client.responses.create(model=GPT, input="hi")
    assert raised.value.status_code == 502
    assert trial.settle(timeout=5)


@pytest.mark.anyio
async def test_concurrent_calls_of_four_trials_land_in_their_own_transcripts(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    provider_server.default = Echo(delay=0.05)  # calls overlap
    trials = [open_trial(proxy, provider_server, task=f"t{i}", index=i) for i in range(4)]
    answers: dict[tuple[int, int], str] = {}

    async def ask(client: anthropic.AsyncAnthropic, i: int, j: int) -> None:
        message = {**MESSAGE, "messages": [{"role": "user", "content": f"trial {i} call {j}"}]}
        if j % 2:
            async with client.messages.stream(**message) as stream:  # type: ignore[arg-type]
                answers[i, j] = text_of(await stream.get_final_message())
        else:
            answers[i, j] = text_of(await client.messages.create(**message))  # type: ignore[call-overload]

    clients = [
        anthropic.AsyncAnthropic(base_url=t.anthropic_base_url, api_key=KEY, max_retries=0)
        for t in trials
    ]
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for i, client in enumerate(clients):
                for j in range(5):
                    group.start_soon(ask, client, i, j)
    for client in clients:
        await client.close()

    assert answers == {(i, j): f"trial {i} call {j}" for i in range(4) for j in range(5)}
    assert provider_server.max_in_flight > 1
    for i, trial in enumerate(trials):
        texts = sorted(c.response["message"]["content"] for c in calls_of(trial) if c.response)
        assert texts == [f"trial {i} call {j}" for j in range(5)]
        assert trial.settle(timeout=5)


def test_a_stream_the_agent_closes_early_leaves_the_proxy_serving(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    release = threading.Event()
    provider_server.script(Hold(release, Reply("a long answer " * 20)))
    trial = open_trial(proxy, provider_server)
    with anthropic_client(trial) as client:
        with client.messages.stream(**MESSAGE) as stream:  # type: ignore[arg-type]
            first = next(iter(stream))
            assert first.type == "message_start"
        release.set()
        after = client.messages.create(**MESSAGE)  # type: ignore[call-overload]
    assert text_of(after) == "hi"
    assert trial.settle(timeout=10)
    calls = calls_of(trial)
    assert len(calls) == 2
    assert calls[-1].response is not None and calls[-1].response["message"]["content"] == "hi"


def test_stop_closes_everything_and_a_new_start_serves_again(
    proxy: ModelProxy, provider_server: ProviderServer
) -> None:
    trial = open_trial(proxy, provider_server)
    old_port = proxy.port
    idle = socket.create_connection(("127.0.0.1", old_port), timeout=5)
    target = f"/trialkit/{trial.token}/anthropic".encode()
    idle.sendall(b"HEAD " + target + b" HTTP/1.1\r\nhost: x\r\n\r\n")
    assert idle.recv(4096).startswith(b"HTTP/1.1 200")

    release = threading.Event()
    provider_server.script(Hold(release, Reply("held")))
    streamed = {**MESSAGE, "stream": True}
    with httpx.Client(timeout=10) as held:
        url = f"{trial.anthropic_base_url}/v1/messages"
        with held.stream("POST", url, json=streamed) as response:
            assert response.status_code == 200
            started = time.monotonic()
            proxy.stop()
            assert time.monotonic() - started < 8
            with pytest.raises(httpx.HTTPError):
                response.read()
    release.set()
    assert not proxy.running
    assert idle.recv(4096) == b""  # the idle keep-alive connection was closed too
    idle.close()
    with pytest.raises(httpx.ConnectError):
        httpx.head(trial.anthropic_base_url)

    proxy.start()
    assert proxy.running
    assert (
        httpx.head(f"{trial.base.replace(str(old_port), str(proxy.port))}/anthropic").status_code
        == 403
    )
    fresh = open_trial(proxy, provider_server)
    with anthropic_client(fresh) as client:
        assert text_of(client.messages.create(**MESSAGE)) == "hi"  # type: ignore[call-overload]
    assert len(calls_of(fresh)) == 1


def test_the_shared_proxy_runs_while_it_has_users() -> None:
    shared = shared_proxy()
    assert shared_proxy() is shared
    was_running = shared.running
    shared.acquire()
    try:
        shared.acquire()
        shared.release()
        assert shared.running
    finally:
        shared.release()
    assert shared.running is was_running
