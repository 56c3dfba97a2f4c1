"""The fake provider server itself: scripting, recording, both wire formats, load, stopping."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import anyio
import pytest
from openai import AsyncOpenAI

from tests.fakes.provider_server import (
    Drop,
    Echo,
    Fail,
    ProviderServer,
    Raw,
    Reply,
    ToolUse,
    malformed,
)

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


def post(
    server: ProviderServer,
    path: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 5.0,
) -> tuple[int, dict[str, str], bytes]:
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        payload = json.dumps(body if body is not None else {"model": "m", "messages": []})
        connection.request(
            "POST", path, payload, {"content-type": "application/json", **(headers or {})}
        )
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def user(text: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


def test_script_is_consumed_in_order_then_the_default_applies(
    provider_server: ProviderServer,
) -> None:
    provider_server.script(Reply("one"), Reply("two"))
    assert provider_server.pending == 2
    texts = [json.loads(post(provider_server, CHAT, user("echo me"))[2]) for _ in range(3)]
    contents = [t["choices"][0]["message"]["content"] for t in texts]
    assert contents == ["one", "two", "echo me"]
    assert provider_server.pending == 0


def test_openai_wire_format(provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply(
            "hi",
            tool_calls=[ToolUse("f", {"a": 1}, id="call_9"), ToolUse("g", "{broken")],
            reasoning="because",
        )
    )
    status, _, body = post(provider_server, CHAT, user("x"))
    data = json.loads(body)
    assert status == 200
    assert data["object"] == "chat.completion"
    choice = data["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["reasoning_content"] == "because"
    calls = choice["message"]["tool_calls"]
    assert calls[0] == {
        "id": "call_9",
        "type": "function",
        "function": {"name": "f", "arguments": '{"a": 1}'},
    }
    assert calls[1]["function"]["arguments"] == "{broken"
    assert data["usage"]["total_tokens"] > 0


def test_anthropic_wire_format(provider_server: ProviderServer) -> None:
    provider_server.script(
        Reply("hi", tool_calls=[ToolUse("f", {"a": 1})], reasoning="because"),
    )
    status, _, body = post(provider_server, MESSAGES, user("x"))
    data = json.loads(body)
    assert status == 200
    assert data["type"] == "message"
    assert [block["type"] for block in data["content"]] == ["thinking", "text", "tool_use"]
    assert data["content"][2]["input"] == {"a": 1}
    assert data["stop_reason"] == "tool_use"
    assert data["usage"]["input_tokens"] > 0


def test_echo_reads_text_blocks_and_tool_results(provider_server: ProviderServer) -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "last"}]},
        ],
    }
    data = json.loads(post(provider_server, MESSAGES, body)[2])
    assert data["content"] == [{"type": "text", "text": "last"}]


def test_errors_have_each_providers_body_and_retry_after(provider_server: ProviderServer) -> None:
    provider_server.script(Fail(429, retry_after=2), Fail(529, "busy"))
    status, headers, body = post(provider_server, CHAT)
    assert status == 429
    assert headers["retry-after"] == "2"
    assert json.loads(body)["error"]["code"] == "rate_limit_exceeded"
    status, _, body = post(provider_server, MESSAGES)
    assert status == 529
    assert json.loads(body) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
        "request_id": "req_fake",
    }


def test_drop_closes_without_a_response(provider_server: ProviderServer) -> None:
    provider_server.script(Drop())
    with pytest.raises(http.client.RemoteDisconnected):
        post(provider_server, CHAT)


def test_raw_and_malformed_bodies(provider_server: ProviderServer) -> None:
    provider_server.script(Raw(b"<html></html>", status=502, content_type="text/html"), malformed())
    status, headers, body = post(provider_server, CHAT)
    assert (status, headers["content-type"], body) == (502, "text/html", b"<html></html>")
    status, _, body = post(provider_server, CHAT)
    assert status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)


def test_records_requests(provider_server: ProviderServer) -> None:
    post(provider_server, CHAT, user("a"), {"Authorization": "Bearer sk-1"})
    post(provider_server, MESSAGES, user("b"), {"X-Api-Key": "sk-2"})
    first, second = provider_server.requests
    assert (first.path, first.api_key, first.json["messages"][0]["content"]) == (CHAT, "sk-1", "a")
    assert (second.path, second.api_key, second.headers["x-api-key"]) == (MESSAGES, "sk-2", "sk-2")
    assert provider_server.last_request is second
    provider_server.reset()
    assert provider_server.requests == []


def test_a_required_key_is_checked() -> None:
    with ProviderServer(api_key="sk-right") as server:
        assert post(server, CHAT, headers={"authorization": "Bearer sk-wrong"})[0] == 401
        status, _, body = post(server, MESSAGES)
        assert (status, json.loads(body)["error"]["type"]) == (401, "authentication_error")
        assert post(server, MESSAGES, headers={"x-api-key": "sk-right"})[0] == 200
        assert post(server, CHAT, headers={"authorization": "Bearer sk-right"})[0] == 200


def test_unknown_routes_and_bad_bodies(provider_server: ProviderServer) -> None:
    provider_server.script(Reply("kept for a real call"))
    assert post(provider_server, "/v1/images/generations")[0] == 404
    host, port = provider_server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        connection.request("POST", CHAT, b"not json", {"content-type": "application/json"})
        assert connection.getresponse().status == 400
    finally:
        connection.close()
    assert provider_server.pending == 1
    assert provider_server.request_count == 2


def test_latency_applies_to_every_answer() -> None:
    with ProviderServer(latency=0.05, default=Echo()) as server:
        started = time.perf_counter()
        post(server, CHAT)
        assert time.perf_counter() - started >= 0.05


def test_stop_cuts_slow_answers_and_idle_connections_short() -> None:
    server = ProviderServer(default=Reply("late", delay=30)).start()
    host, port = server.url.removeprefix("http://").split(":")
    idle = http.client.HTTPConnection(host, int(port), timeout=5)
    idle.connect()  # an open keep-alive connection, with no request on it
    errors: list[BaseException] = []

    def slow_request() -> None:
        try:
            post(server, CHAT)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(exc)

    worker = threading.Thread(target=slow_request)
    worker.start()
    while server.request_count == 0:
        time.sleep(0.005)
    started = time.perf_counter()
    server.stop()
    worker.join()
    idle.close()
    assert time.perf_counter() - started < 1.0
    assert len(errors) == 1  # the slow request was dropped, not answered


def test_handles_200_concurrent_requests_from_the_sdk() -> None:
    async def main(server: ProviderServer) -> list[str]:
        answers: list[str] = [""] * 200
        client = AsyncOpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)

        async def ask(index: int) -> None:
            completion = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": f"request {index}"}]
            )
            answers[index] = completion.choices[0].message.content or ""

        try:
            async with anyio.create_task_group() as group:
                for index in range(200):
                    group.start_soon(ask, index)
        finally:
            await client.close()
        return answers

    with ProviderServer(latency=0.2) as server:
        answers = anyio.run(main, server)
        assert answers == [f"request {index}" for index in range(200)]
        assert server.request_count == 200
        assert server.max_in_flight >= 10  # answered side by side, not one after the other
