"""A weather assistant built on the OpenAI Agents SDK, written as it runs in production.

The SDK makes its model client from the environment: `OPENAI_API_KEY`, and `OPENAI_BASE_URL`
to use another OpenAI-compatible server (a proxy, vLLM, llama.cpp). `WEATHER_AGENT_MODEL`
chooses the model. Nothing here knows about trialkit: `evals.py` calls `ask` as it is.
"""

from __future__ import annotations

import os

from agents import Agent, Runner, function_tool

MODEL = os.environ.get("WEATHER_AGENT_MODEL", "gpt-4.1-mini")

FORECASTS = {
    "oslo": "-3 °C, snowing, wind from the north",
    "lisbon": "19 °C, sunny, a light breeze",
    "nairobi": "24 °C, showers in the afternoon",
}
"""Today's forecasts: a stand-in for the weather service a real deployment would call."""


@function_tool
def get_weather(city: str) -> str:
    """Today's weather forecast for a city.

    Args:
        city: The city's name, e.g. "Oslo".
    """
    name = city.lower()
    known = next((known for known in FORECASTS if known in name), None)
    if known is None:
        return f"No forecast is available for {city!r}."
    return f"{known.title()}: {FORECASTS[known]}"


agent = Agent(
    name="Weather assistant",
    instructions=(
        "You answer questions about today's weather. Always look the forecast up with the "
        "get_weather tool, and answer in one or two sentences from what it says. If it has "
        "no forecast, say so and do not guess."
    ),
    tools=[get_weather],
    model=MODEL,
)


async def ask(question: str) -> str:
    """The assistant's answer to one question (its tool calls happen along the way)."""
    result = await Runner.run(agent, question)
    return str(result.final_output)
