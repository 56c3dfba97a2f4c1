"""One model call through a real SDK client, and the answers an `AnswerServer` gives it.

`ask` makes one call with the official `openai` (Chat Completions) or `anthropic` (Messages)
SDK, sync or async, streamed or not, and returns the text it got: what an agent sees. `good`
is a well-formed answer in the wire format of the request's path, streamed when the request
asks for a stream, for `AnswerServer` to send as it is told (encoded, cut...).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import anthropic
import anyio
import openai

from tests.capture.helpers import KEY
from tests.fakes import provider_streams, provider_wire
from tests.fakes.answer_server import Answer, Received
from tests.fakes.provider_server import Reply

Sdk = Literal["openai", "anthropic"]
Mode = Literal["sync", "async"]
OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
TEXT = "Paris is the capital of France, é ü ✓"
"""Not only ASCII: a decoder that splits a character shows."""


def ask(
    sdk: Sdk, mode: Mode, stream: bool, base_url: str, *, retries: int = 0, prompt: str = "Hi"
) -> str:
    """The text the model's answer holds, as the SDK gives it (raises what the SDK raises)."""
    if mode == "async":
        return anyio.run(lambda: ask_async(sdk, stream, base_url, retries=retries, prompt=prompt))
    if sdk == "openai":
        client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=retries)
        with client:
            messages: Any = [{"role": "user", "content": prompt}]
            if not stream:
                reply = client.chat.completions.create(model=OPENAI_MODEL, messages=messages)
                return reply.choices[0].message.content or ""
            with client.chat.completions.create(
                model=OPENAI_MODEL, messages=messages, stream=True
            ) as chunks:
                return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    claude = anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=retries)
    with claude:
        asked: Any = [{"role": "user", "content": prompt}]
        if not stream:
            message = claude.messages.create(model=ANTHROPIC_MODEL, max_tokens=64, messages=asked)
            return "".join(b.text for b in message.content if b.type == "text")
        with claude.messages.create(
            model=ANTHROPIC_MODEL, max_tokens=64, messages=asked, stream=True
        ) as events:
            return "".join(
                e.delta.text
                for e in events
                if e.type == "content_block_delta" and e.delta.type == "text_delta"
            )


async def ask_async(
    sdk: Sdk, stream: bool, base_url: str, *, retries: int = 0, prompt: str = "Hi"
) -> str:
    """`ask` with the async clients."""
    if sdk == "openai":
        client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=KEY, max_retries=retries)
        async with client:
            messages: Any = [{"role": "user", "content": prompt}]
            if not stream:
                reply = await client.chat.completions.create(model=OPENAI_MODEL, messages=messages)
                return reply.choices[0].message.content or ""
            pieces = []
            async with await client.chat.completions.create(
                model=OPENAI_MODEL, messages=messages, stream=True
            ) as chunks:
                async for chunk in chunks:
                    if chunk.choices:
                        pieces.append(chunk.choices[0].delta.content or "")
            return "".join(pieces)
    claude = anthropic.AsyncAnthropic(base_url=base_url, api_key=KEY, max_retries=retries)
    async with claude:
        asked: Any = [{"role": "user", "content": prompt}]
        if not stream:
            message = await claude.messages.create(
                model=ANTHROPIC_MODEL, max_tokens=64, messages=asked
            )
            return "".join(b.text for b in message.content if b.type == "text")
        texts = []
        async with await claude.messages.create(
            model=ANTHROPIC_MODEL, max_tokens=64, messages=asked, stream=True
        ) as events:
            async for event in events:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    texts.append(event.delta.text)
        return "".join(texts)


def events_of(received: Received, text: str = TEXT) -> list[bytes]:
    """The events of a well-formed streamed answer to `received`, one `bytes` each."""
    request = received.request
    if received.path.endswith("/messages"):
        return provider_streams.messages_events(Reply(text), request, "1")
    return provider_streams.chat_events(Reply(text), request, "1", 1)


def body_of(received: Received, text: str = TEXT) -> dict[str, Any]:
    """A well-formed unstreamed answer to `received`."""
    request = received.request
    if received.path.endswith("/messages"):
        return provider_wire.anthropic_message(Reply(text), request, "1")
    return provider_wire.chat_completion(Reply(text), request, "1", 1)


def good(received: Received, *, encoding: str | None = None, text: str = TEXT) -> Answer:
    """A well-formed answer to `received` (streamed when it asks for a stream)."""
    if received.request.get("stream") is True:
        return Answer(
            stream=events_of(received, text), content_type="text/event-stream", encoding=encoding
        )
    return Answer(json.dumps(body_of(received, text)).encode(), encoding=encoding)
