"""Streams that end early (`Cut`), streams held before their last event (`Hold`), and the
count of TCP connections the fake provider server accepts."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx2
import openai
import pytest
from openai import OpenAI

from tests.fakes.provider_server import Cut, Hold, ProviderServer, Reply
from tests.fakes.provider_streams import parse_events

CHAT_STREAM = {"model": "m", "messages": [{"role": "user", "content": "a b c d"}], "stream": True}


def chat_url(server: ProviderServer) -> str:
    return f"{server.openai_base_url}/chat/completions"


def full_stream(server: ProviderServer) -> list[tuple[str | None, str]]:
    with httpx2.Client(timeout=5) as client:
        return parse_events(client.post(chat_url(server), json=CHAT_STREAM).content)


def choices(data: str) -> Any:
    return json.loads(data)["choices"]


def test_a_clean_cut_ends_the_response_after_n_events(provider_server: ProviderServer) -> None:
    complete = full_stream(provider_server)
    provider_server.script(Cut(after_events=3))
    with httpx2.Client(timeout=5) as client:
        response = client.post(chat_url(provider_server), json=CHAT_STREAM)
        assert [choices(data) for _, data in parse_events(response.content)] == [
            choices(data) for _, data in complete[:3]
        ]
        # A clean end: the connection stays usable for the next request.
        assert client.post(chat_url(provider_server), json=CHAT_STREAM).status_code == 200
    assert provider_server.connections == 2  # the first stream's client, then one for both


def test_an_abrupt_cut_closes_the_connection_mid_body(provider_server: ProviderServer) -> None:
    provider_server.script(Cut(after_events=2, abrupt=True))
    received: list[bytes] = []
    with (
        httpx2.Client(timeout=5) as client,
        client.stream("POST", chat_url(provider_server), json=CHAT_STREAM) as response,
        pytest.raises(httpx2.RemoteProtocolError, match="incomplete chunked read"),
    ):
        received.extend(response.iter_bytes())
    assert len(parse_events(b"".join(received))) == 2


def test_cuts_seen_by_the_sdk(provider_server: ProviderServer) -> None:
    provider_server.script(
        Cut(after_events=2, reply=Reply("never finished")),
        Cut(after_events=2, abrupt=True),
        Cut(after_events=0, abrupt=True),
    )
    messages: Any = CHAT_STREAM["messages"]
    with OpenAI(base_url=provider_server.openai_base_url, api_key="sk", max_retries=0) as client:
        chunks = list(client.chat.completions.create(model="m", messages=messages, stream=True))
        assert [chunk.choices[0].delta.content for chunk in chunks] == ["", "never"]
        with pytest.raises(openai.APIConnectionError):
            list(client.chat.completions.create(model="m", messages=messages, stream=True))
        # A non-streamed answer is one event: 0 of them, abruptly, is a body that never comes.
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=messages)


def test_a_non_streamed_clean_cut_at_zero_is_an_empty_body(provider_server: ProviderServer) -> None:
    provider_server.script(Cut(after_events=0), Cut(after_events=1))
    body = {**CHAT_STREAM, "stream": False}
    with httpx2.Client(timeout=5) as client:
        empty = client.post(chat_url(provider_server), json=body)
        whole = client.post(chat_url(provider_server), json=body)
    assert (empty.status_code, empty.content) == (200, b"")
    assert whole.json()["choices"][0]["message"]["content"] == "a b c d"


def test_hold_sends_every_event_but_the_last_until_released(
    provider_server: ProviderServer,
) -> None:
    events = full_stream(provider_server)
    release = threading.Event()
    provider_server.script(Hold(release, timeout=10))
    seen: list[tuple[str | None, str]] = []
    with (
        httpx2.Client(timeout=5) as client,
        client.stream("POST", chat_url(provider_server), json=CHAT_STREAM) as response,
    ):
        lines = response.iter_lines()
        started = time.monotonic()
        while len(seen) < len(events) - 1:
            line = next(lines)
            if line.startswith("data: "):
                seen.append((None, line.removeprefix("data: ")))
        # Everything but `[DONE]` arrived while the server still holds it: nothing buffered.
        assert time.monotonic() - started < 5
        assert provider_server.pending == 0 and not release.is_set()
        release.set()
        rest = [line for line in lines if line]
    assert seen[0][1].startswith('{"id": "chatcmpl-fake-2"')
    assert rest == ["data: [DONE]"]


def test_hold_with_the_sdk_and_its_timeout(provider_server: ProviderServer) -> None:
    release = threading.Event()
    provider_server.script(Hold(release), Hold(threading.Event(), timeout=0.1))
    messages: Any = CHAT_STREAM["messages"]
    with OpenAI(base_url=provider_server.openai_base_url, api_key="sk", max_retries=0) as client:
        stream = iter(client.chat.completions.create(model="m", messages=messages, stream=True))
        assert next(stream).choices[0].delta.role == "assistant"
        release.set()
        assert len(list(stream)) > 1
        # Never released: after its timeout the last event goes anyway.
        finished = list(client.chat.completions.create(model="m", messages=messages, stream=True))
    assert finished[-1].choices[0].finish_reason == "stop"


def test_stopping_ends_a_hold() -> None:
    server = ProviderServer().start()
    server.script(Hold(threading.Event(), timeout=30))
    errors: list[BaseException] = []

    def read() -> None:
        try:
            full_stream(server)
        except httpx2.HTTPError as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 5
    while server.request_count == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    started = time.monotonic()
    server.stop()
    reader.join(timeout=5)
    assert time.monotonic() - started < 1.0
    assert [type(error) for error in errors] == [httpx2.RemoteProtocolError]


def test_connections_are_counted() -> None:
    with ProviderServer() as server:
        url = chat_url(server)
        assert server.connections == 0
        with OpenAI(base_url=server.openai_base_url, api_key="sk", max_retries=0) as client:
            for _ in range(3):  # one kept-alive connection for the three
                client.embeddings.create(model="e", input="x")
        with httpx2.Client(timeout=5) as other:
            other.post(chat_url(server), json=CHAT_STREAM)
        assert (server.connections, server.request_count) == (2, 4)
        server.reset()
        assert server.connections == 0
    with pytest.raises(httpx2.ConnectError), httpx2.Client(timeout=1) as client:
        client.post(url, json=CHAT_STREAM)  # a stopped server accepts nothing
    assert server.connections == 0
