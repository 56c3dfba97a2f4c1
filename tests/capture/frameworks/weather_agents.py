"""One small agent per SDK and framework, written as a user writes it, with one tool.

Each `run_*(prompt, base_url)` asks a model about the weather, runs the tool the model calls
(`get_weather(city)`, "sunny in {city}") and returns the model's final text: one tool round
trip. `base_url` is the provider's root (`http://127.0.0.1:PORT`, maybe with a path prefix);
each agent adds `/v1` where its SDK expects it, nothing else is changed for the tests. The
OpenAI and Anthropic SDK agents come in a sync and an async form, one streamed and one not,
so the four ways a call leaves the HTTP client are all covered. Each agent imports its own
framework, as a script of its own would: importing them all takes tens of seconds.

Background traffic the frameworks make on their own is silenced the documented way, by
environment variables that must be set before the framework is imported (the `conftest.py`
next to this module sets them):

- `OPENAI_AGENTS_DISABLE_TRACING=1`: openai-agents otherwise exports traces of every run to
  api.openai.com (a second, non-model HTTP client, in a background thread).
- `LITELLM_LOCAL_MODEL_COST_MAP=True`: `import litellm` otherwise downloads its model price
  list from GitHub.
"""

from __future__ import annotations

import json
from typing import Any

MODEL_OPENAI = "gpt-4.1-mini"
MODEL_ANTHROPIC = "claude-sonnet-5-5"  # pydantic-ai warns of a retired model (an error here)
OPENAI_KEY = "sk-test-agents"
ANTHROPIC_KEY = "sk-ant-test-agents"
INSTRUCTIONS = "Answer questions about the weather with the get_weather tool."


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city."}},
    "required": ["city"],
}


# --- openai: Chat Completions -------------------------------------------------------------

CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": WEATHER_PARAMETERS,
        },
    }
]


def run_openai_chat(prompt: str, base_url: str) -> str:
    """Chat Completions, sync, not streamed."""
    from openai import OpenAI

    with OpenAI(base_url=f"{base_url}/v1", api_key=OPENAI_KEY) as client:
        messages: list[Any] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": prompt},
        ]
        while True:
            completion = client.chat.completions.create(
                model=MODEL_OPENAI, messages=messages, tools=CHAT_TOOLS
            )
            message = completion.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                if call.type == "function":
                    result = get_weather(**json.loads(call.function.arguments))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


async def run_openai_chat_async(prompt: str, base_url: str) -> str:
    """Chat Completions, async, streamed (with the usage chunk), deltas put together by hand."""
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=f"{base_url}/v1", api_key=OPENAI_KEY) as client:
        messages: list[Any] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": prompt},
        ]
        while True:
            stream = await client.chat.completions.create(
                model=MODEL_OPENAI,
                messages=messages,
                tools=CHAT_TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            text = ""
            calls: dict[int, dict[str, str]] = {}
            async for chunk in stream:
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for delta in choice.delta.tool_calls or ():
                        call = calls.setdefault(
                            delta.index, {"id": "", "name": "", "arguments": ""}
                        )
                        call["id"] = delta.id or call["id"]
                        if delta.function is not None:
                            call["name"] += delta.function.name or ""
                            call["arguments"] += delta.function.arguments or ""
            if not calls:
                return text
            messages.append(
                {
                    "role": "assistant",
                    "content": text or None,
                    "tool_calls": [
                        {
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["name"], "arguments": call["arguments"]},
                        }
                        for call in calls.values()
                    ],
                }
            )
            for call in calls.values():
                result = get_weather(**json.loads(call["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


# --- openai: Responses --------------------------------------------------------------------

RESPONSES_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": WEATHER_PARAMETERS,
    }
]


def run_openai_responses(prompt: str, base_url: str) -> str:
    """Responses, sync, streamed with the SDK's stream helper."""
    from openai import OpenAI

    with OpenAI(base_url=f"{base_url}/v1", api_key=OPENAI_KEY) as client:
        items: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            with client.responses.stream(
                model=MODEL_OPENAI, instructions=INSTRUCTIONS, input=items, tools=RESPONSES_TOOLS
            ) as stream:
                response = stream.get_final_response()
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                return response.output_text
            for call in calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.call_id,
                        "name": call.name,
                        "arguments": call.arguments,
                    }
                )
                result = get_weather(**json.loads(call.arguments))
                items.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": result}
                )


async def run_openai_responses_async(prompt: str, base_url: str) -> str:
    """Responses, async, not streamed; the output items go back as they came."""
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=f"{base_url}/v1", api_key=OPENAI_KEY) as client:
        items: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            response = await client.responses.create(
                model=MODEL_OPENAI, instructions=INSTRUCTIONS, input=items, tools=RESPONSES_TOOLS
            )
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                return response.output_text
            items += [item.model_dump(exclude_none=True) for item in response.output]
            for call in calls:
                result = get_weather(**json.loads(call.arguments))
                items.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": result}
                )


# --- anthropic: Messages ------------------------------------------------------------------

ANTHROPIC_TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": WEATHER_PARAMETERS,
    }
]


def run_anthropic(prompt: str, base_url: str) -> str:
    """Messages, sync, streamed with the SDK's stream helper."""
    from anthropic import Anthropic

    with Anthropic(base_url=base_url, api_key=ANTHROPIC_KEY) as client:
        messages: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            with client.messages.stream(
                model=MODEL_ANTHROPIC,
                max_tokens=1024,
                system=INSTRUCTIONS,
                messages=messages,
                tools=ANTHROPIC_TOOLS,
            ) as stream:
                message = stream.get_final_message()
            if message.stop_reason != "tool_use":
                return "".join(block.text for block in message.content if block.type == "text")
            messages.append({"role": "assistant", "content": message.content})
            results = []
            for block in message.content:
                if block.type == "tool_use":
                    arguments: dict[str, Any] = block.input
                    result = get_weather(**arguments)
                    results.append(
                        {"type": "tool_result", "tool_use_id": block.id, "content": result}
                    )
            messages.append({"role": "user", "content": results})


async def run_anthropic_async(prompt: str, base_url: str) -> str:
    """Messages, async, streamed as raw events (`create(stream=True)`), put together by hand."""
    from anthropic import AsyncAnthropic

    async with AsyncAnthropic(base_url=base_url, api_key=ANTHROPIC_KEY) as client:
        messages: list[Any] = [{"role": "user", "content": prompt}]
        while True:
            stream = await client.messages.create(
                model=MODEL_ANTHROPIC,
                max_tokens=1024,
                system=INSTRUCTIONS,
                messages=messages,
                tools=ANTHROPIC_TOOLS,
                stream=True,
            )
            blocks: list[dict[str, Any]] = []
            arguments: dict[int, str] = {}
            async for event in stream:
                if event.type == "content_block_start":
                    blocks.append(event.content_block.model_dump(exclude_none=True))
                elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                    blocks[event.index]["text"] += event.delta.text
                elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                    arguments[event.index] = (
                        arguments.get(event.index, "") + event.delta.partial_json
                    )
            for index, text in arguments.items():
                blocks[index]["input"] = json.loads(text)
            uses = [block for block in blocks if block["type"] == "tool_use"]
            if not uses:
                return "".join(block["text"] for block in blocks if block["type"] == "text")
            messages.append({"role": "assistant", "content": blocks})
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": use["id"],
                    "content": get_weather(**use["input"]),
                }
                for use in uses
            ]
            messages.append({"role": "user", "content": results})


# --- frameworks ---------------------------------------------------------------------------


async def run_openai_agents(prompt: str, base_url: str) -> str:
    """OpenAI Agents SDK: `Agent` + `function_tool` + `Runner.run` (the Responses API)."""
    from openai import AsyncOpenAI

    # openai-agents: ruff sorts it as first-party, the test suite having a `tests/agents` too.
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool

    async with AsyncOpenAI(base_url=f"{base_url}/v1", api_key=OPENAI_KEY) as client:
        agent = Agent(
            name="weather",
            instructions=INSTRUCTIONS,
            tools=[function_tool(get_weather)],
            model=OpenAIResponsesModel(model=MODEL_OPENAI, openai_client=client),
        )
        result = await Runner.run(agent, prompt)
        return str(result.final_output)


async def run_pydantic_ai_openai(prompt: str, base_url: str) -> str:
    """pydantic-ai with the model `openai:` names (Responses), pointed at `base_url`."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{base_url}/v1", api_key=OPENAI_KEY)
    agent = Agent(
        OpenAIResponsesModel(MODEL_OPENAI, provider=provider),
        instructions=INSTRUCTIONS,
        tools=[get_weather],
    )
    async with agent:
        result = await agent.run(prompt)
    return result.output


async def run_pydantic_ai_anthropic(prompt: str, base_url: str) -> str:
    """pydantic-ai with its Anthropic model (which streams every request)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(base_url=base_url, api_key=ANTHROPIC_KEY)
    agent = Agent(
        AnthropicModel(MODEL_ANTHROPIC, provider=provider),
        instructions=INSTRUCTIONS,
        tools=[get_weather],
    )
    async with agent:
        result = await agent.run(prompt)
    return result.output


def run_langchain_openai(prompt: str, base_url: str) -> str:
    """langchain-openai: `ChatOpenAI(...).bind_tools`, the tool loop by hand (Chat Completions)."""
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    weather = tool(get_weather)
    model = ChatOpenAI(model=MODEL_OPENAI, base_url=f"{base_url}/v1", api_key=OPENAI_KEY)
    bound = model.bind_tools([weather])
    messages: list[Any] = [SystemMessage(INSTRUCTIONS), HumanMessage(prompt)]
    while True:
        answer = bound.invoke(messages)
        if not answer.tool_calls:
            return str(answer.content)
        messages.append(answer)
        for call in answer.tool_calls:
            messages.append(ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"]))


def run_litellm_openai(prompt: str, base_url: str) -> str:
    """litellm: `completion` with an `openai/` model and `api_base` (sync, not streamed)."""
    import litellm

    messages: list[Any] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": prompt},
    ]
    while True:
        response = litellm.completion(
            model=f"openai/{MODEL_OPENAI}",
            api_base=f"{base_url}/v1",
            api_key=OPENAI_KEY,
            messages=messages,
            tools=CHAT_TOOLS,
        )
        message = response.choices[0].message
        if not message.tool_calls:
            return str(message.content or "")
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


async def run_litellm_anthropic(prompt: str, base_url: str) -> str:
    """litellm: `acompletion` with an `anthropic/` model, streamed (its aiohttp transport)."""
    import litellm

    messages: list[Any] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": prompt},
    ]
    while True:
        stream = await litellm.acompletion(
            model=f"anthropic/{MODEL_ANTHROPIC}",
            api_base=base_url,
            api_key=ANTHROPIC_KEY,
            messages=messages,
            tools=CHAT_TOOLS,
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
        response = litellm.stream_chunk_builder(chunks, messages=messages)
        assert isinstance(response, litellm.ModelResponse)
        message = response.choices[0].message
        if not message.tool_calls:
            return str(message.content or "")
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
