"""The quickstart: SmolLM2-135M-Instruct, running on this machine through llama.cpp.

    trialkit run examples/quickstart/evals.py:capability
    trialkit run examples/quickstart/evals.py:regression

The capability suite samples at temperature 0.9, so trials differ and pass@k (can it ever?)
and pass^k (does it always?) tell different stories. The regression suite runs at temperature
0: what it answers right today, it must keep answering right.

Replay the committed recording in seconds, without llama.cpp:

    trialkit run examples/quickstart/evals.py:capability \\
        --cache examples/quickstart/cassette --cache-mode replay
"""

from __future__ import annotations

from trialkit import Suite, Task, graders
from trialkit.models import GenerationConfig, ResponseFormat

MODEL = "local/smollm2"
SHORT = "Answer in one short sentence."

CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def ask(question: str) -> str:
    return f"{question} {SHORT}"


capability = Suite(
    id="smollm2-capability",
    kind="capability",  # a task passes if at least one trial passes
    model=MODEL,
    trials=5,
    config=GenerationConfig(temperature=0.9, max_tokens=48),
    tasks=[
        Task(
            id="capital-germany",
            input=ask("What is the capital of Germany?"),
            graders=[graders.contains("berlin")],
        ),
        Task(
            id="capital-spain",
            input=ask("What is the capital of Spain?"),
            graders=[graders.contains("madrid")],
        ),
        Task(
            id="days-in-week",
            input=ask("How many days are in a week?"),
            graders=[graders.matches(r"\b(7|seven)\b", ignore_case=True)],
        ),
        Task(
            id="largest-planet",  # a 135M-parameter model rarely knows this one
            input=ask("What is the largest planet in the solar system?"),
            graders=[graders.contains("jupiter")],
        ),
        Task(
            id="author",
            input=ask("Who wrote Romeo and Juliet?"),
            graders=[graders.contains("shakespeare")],
        ),
    ],
)

regression = Suite(
    id="smollm2-regression",
    kind="regression",  # a task passes only if every trial passes
    model=MODEL,
    trials=3,
    config=GenerationConfig(temperature=0, max_tokens=48),
    tasks=[
        Task(
            id="capital-france",
            input=ask("What is the capital of France?"),
            graders=[graders.contains("paris"), graders.not_contains("berlin")],
        ),
        Task(
            id="capital-japan",
            input=ask("What is the capital of Japan?"),
            graders=[graders.contains("tokyo")],
        ),
        Task(
            id="capital-australia",
            input=ask("What is the capital of Australia?"),
            graders=[graders.contains("canberra")],
        ),
        Task(
            id="json-city",
            input='What is the capital of France? Reply as JSON with a "city" field.',
            response_format=ResponseFormat(json_schema=CITY_SCHEMA),
            graders=[graders.valid_json(where=lambda value: value["city"] == "Paris")],
        ),
    ],
)
