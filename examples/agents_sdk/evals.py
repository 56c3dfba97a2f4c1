"""The weather assistant of weather_agent.py, evaluated as it is: an OpenAI Agents SDK agent
with one tool, graded on the tool calls it made and on what it answered.

    trialkit run examples/agents_sdk/evals.py \\
        --cache examples/agents_sdk/cassette --cache-mode replay --offline

trialkit captures the agent's model calls at its HTTP client, so the transcript of every trial
holds them (request, answer, usage, cost) and the tool calls the model asked for, with their
results; the committed cassette answers them, so this runs offline, with no key, in seconds.
record.py records the cassette again (see README.md).
"""

from __future__ import annotations

import os
import re

# Set before the SDK is imported: otherwise openai-agents uploads a trace of every run to
# api.openai.com from a thread of its own, traffic that is no model call and that fails where
# the network is closed.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
# The SDK will not make its client without a key. A replay sends nothing, so a placeholder
# will do; a real key in the environment is used instead.
os.environ.setdefault("OPENAI_API_KEY", "placeholder-replay-sends-no-key")

from weather_agent import ask

from trialkit import GradeContext, Suite, Task, grader, graders


def city(name: str) -> re.Pattern[str]:
    """A tool argument that names the city, however the model put it ("Oslo", "Oslo, Norway")."""
    return re.compile(rf"\b{name}\b", re.IGNORECASE)


@grader
def looked_up_then_answered(ctx: GradeContext) -> bool:
    """Two model calls: the first asked for the forecast, the second answered from it."""
    calls = ctx.transcript.model_calls
    reasons = [call.response["finish_reason"] if call.response else None for call in calls]
    return reasons == ["tool_calls", "stop"]


suite = Suite(
    id="weather-assistant",
    kind="regression",  # every trial of every task must pass
    trials=3,
    harness=ask,  # the agent's own entry point, unchanged
    graders=[graders.no_tool_errors(), looked_up_then_answered],
    tasks=[
        Task(
            id="snow-in-oslo",
            input="What's the weather like in Oslo today?",
            graders=[
                graders.tool_called("get_weather", {"city": city("oslo")}, times=1),
                graders.contains("snow"),
            ],
        ),
        Task(
            id="sunglasses-in-lisbon",
            input="Do I need sunglasses in Lisbon today?",
            graders=[
                graders.tool_called("get_weather", {"city": city("lisbon")}, times=1),
                graders.contains("sunny"),
            ],
        ),
        Task(
            id="no-forecast-for-mars",
            input="What's the weather on Mars today?",
            graders=[
                graders.tool_called("get_weather", times=1),
                graders.matches(r"no forecast|not available", ignore_case=True),
                graders.not_contains("°C"),  # it does not make a forecast up
            ],
        ),
    ],
)
