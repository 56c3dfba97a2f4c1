"""A model as the agent: the chat harness and the model precedence of DESIGN §2."""

from __future__ import annotations

import pytest

from trialkit import Message, Suite, SuiteError, Task, Turns, graders, run_sync
from trialkit.models import GenerationConfig, ModelRequest, ScriptedModel


def test_a_suite_with_a_model_and_no_harness_chats_with_the_model() -> None:
    suite = Suite(
        id="s",
        model="scripted/echo",
        system="Be brief.",
        tasks=[Task(id="t", input="hello", graders=[graders.equals("hello")])],
    )
    report = run_sync(suite)
    assert report.tasks[0].verdict == "pass"
    assert report.run.config["harness"] == "chat"
    assert report.run.config["model"] == "scripted/echo"


def test_the_system_prompt_config_and_turns_reach_the_model() -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest, trial: int) -> str:
        seen.append(request)
        return f"answer {len(request.messages)}"

    suite = Suite(
        id="s",
        model=ScriptedModel("spy", respond),
        system="Be brief.",
        config=GenerationConfig(temperature=0.7, max_tokens=20),
        tasks=[Task(id="t", input=Turns("one", "two"))],
    )
    run_sync(suite)
    first, second = seen
    assert [(m.role, m.content) for m in first.messages] == [
        ("system", "Be brief."),
        ("user", "one"),
    ]
    assert [(m.role, m.content) for m in second.messages] == [
        ("system", "Be brief."),
        ("user", "one"),
        ("assistant", "answer 2"),
        ("user", "two"),
    ]
    assert second.config == GenerationConfig(temperature=0.7, max_tokens=20)


def test_chat_messages_keep_their_own_system_message() -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest, trial: int) -> str:
        seen.append(request)
        return "ok"

    messages = [
        Message(role="system", content="Answer in French."),
        Message(role="user", content="Capital of Italy?"),
    ]
    run_sync(
        Suite(
            id="s",
            model=ScriptedModel("spy", respond),
            system="Be brief.",
            tasks=[Task(id="t", input=messages)],
        )
    )
    assert [m.content for m in seen[0].messages] == ["Answer in French.", "Capital of Italy?"]


def test_model_precedence_task_then_suite_then_option() -> None:
    suite = Suite(
        id="s",
        model="scripted/suite",
        tasks=[
            Task(id="own", input="x", model="scripted/task"),
            Task(id="inherits", input="x"),
        ],
    )
    report = run_sync(suite, model="scripted/option")
    outputs = {t.id: t.results[0].output for t in report.tasks}
    assert outputs == {"own": "task", "inherits": "suite"}
    bare = Suite(id="b", tasks=[Task(id="t", input="x")])
    assert run_sync(bare, model="scripted/option").tasks[0].results[0].output == "option"


def test_no_model_anywhere_says_how_to_choose_one() -> None:
    with pytest.raises(SuiteError, match=r"Suite\(model=...\), --model or TRIALKIT_MODEL"):
        run_sync(Suite(id="s", tasks=[Task(id="t", input="x")]))


def test_an_unknown_model_is_refused_before_running() -> None:
    with pytest.raises(SuiteError, match="unknown provider 'nope'"):
        run_sync(Suite(id="s", model="nope/x", tasks=[Task(id="t", input="x")]))


def test_a_model_id_as_the_harness() -> None:
    report = run_sync(Suite(id="s", harness="scripted/echo", tasks=[Task(id="t", input="hey")]))
    assert report.tasks[0].results[0].output == "hey"


def test_scripted_answers_per_trial_and_tool_calls() -> None:
    from trialkit import ToolCall

    def by_trial(request: ModelRequest, trial: int) -> str:
        return "Paris" if trial % 2 == 0 else "Lyon"

    report = run_sync(
        Suite(
            id="s",
            kind="capability",
            trials=4,
            model=ScriptedModel("v", by_trial),
            tasks=[Task(id="t", input="q", graders=[graders.contains("paris")])],
        )
    )
    assert report.tasks[0].passed == 2 and report.tasks[0].flaky

    call = ToolCall(id="c1", name="search", arguments={"q": "x"})
    model = ScriptedModel("tools", [call, "done"])
    first = run_sync(Suite(id="s", model=model, tasks=[Task(id="t", input=Turns("a", "b"))]))
    assert first.tasks[0].results[0].output == "done"
    again = run_sync(Suite(id="s", model=model, tasks=[Task(id="t", input="a")]))
    assert again.tasks[0].results[0].output == ""  # each trial starts the script afresh


def test_a_scripted_exception_is_a_trial_error() -> None:
    report = run_sync(
        Suite(
            id="s",
            model=ScriptedModel("boom", [RuntimeError("model down")]),
            tasks=[Task(id="t", input="x")],
        )
    )
    result = report.tasks[0].results[0]
    assert result.verdict == "error"
    assert result.error is not None
    assert (result.error.type, result.error.message) == ("ModelError", "scripted/boom: model down")


def test_max_cost_stops_scheduling_new_trials() -> None:
    from trialkit.models import Model, ModelResponse
    from trialkit.transcript import Usage

    class Priced(Model):
        provider = "openai"  # priced by genai-prices

        async def generate(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(
                message=Message(role="assistant", content="ok"),
                usage=Usage(input_tokens=100_000, output_tokens=10_000),
            )

    suite = Suite(id="s", model=Priced("gpt-4o-mini"), trials=10, tasks=[Task(id="t", input="x")])
    report = run_sync(suite, concurrency=1, max_cost=0.05)
    # each trial costs 100k * $0.15/M + 10k * $0.60/M = $0.021: the third one crosses $0.05
    assert report.summary.trials == 3
    assert report.run.status == "stopped"
    assert (
        "cost budget of $0.05 was spent ($0.0630) after 3 of 10 trials"
        in (report.run.config["stop_reason"])
    )
    assert report.summary.cost_usd == pytest.approx(0.063)
    gate = report.gate()
    assert gate.exit_code == 1
    assert gate.reasons[0].startswith("not every trial ran: the cost budget of $0.05 was spent")


def test_grader_tokens_and_costs_are_kept_apart_from_the_agents() -> None:
    from trialkit.models import get_model

    judge = get_model(ScriptedModel("judge", ["PASS, and this verdict is long"]))

    async def judged(ctx: object) -> bool:
        response = await judge.generate(
            ModelRequest(messages=[Message(role="user", content="grade")])
        )
        return response.text.startswith("PASS")

    suite = Suite(
        id="s",
        model=ScriptedModel("agent", ["Paris"]),
        tasks=[
            Task(id="judged", input="capital?", graders=[judged]),
            Task(id="plain", input="capital?", graders=[graders.contains("paris")]),
        ],
    )
    report = run_sync(suite)
    judged_result = report.task("judged").results[0]
    assert judged_result.usage.output_tokens == 1  # "Paris"
    assert judged_result.grader_usage.output_tokens == 7  # the judge's 29 characters
    assert report.task("plain").results[0].grader_usage.output_tokens == 0
    assert report.summary.grader_cost_usd == 0.0
    assert report.summary.grader_usage.output_tokens == 7


def test_reports_name_the_model_that_answered() -> None:
    from trialkit.harness import ChatHarness

    report = run_sync(
        Suite(
            id="s",
            harness=ChatHarness("scripted/a"),
            model="scripted/b",
            tasks=[Task(id="t", input="x")],
        ),
        judge_model="scripted/judge",
    )
    assert report.run.config["model"] == "scripted/a"
    assert report.run.config["judge_model"] == "scripted/judge"
    assert report.tasks[0].results[0].output == "a"
    by_id = run_sync(Suite(id="s", harness="scripted/echo", tasks=[Task(id="t", input="x")]))
    assert by_id.run.config["model"] == "scripted/echo"
    agent = run_sync(
        Suite(id="s", harness=lambda p: p, model="scripted/judge", tasks=[Task(id="t", input="x")])
    )
    assert agent.run.config["model"] is None


def test_unknown_model_ids_are_refused_whatever_the_harness() -> None:
    with pytest.raises(SuiteError, match="unknown provider 'acme'"):
        run_sync(Suite(id="s", harness="acme/x", tasks=[Task(id="t", input="x")]))
    with pytest.raises(SuiteError, match="unknown provider 'acme'"):
        run_sync(
            Suite(id="s", harness=lambda p: p, tasks=[Task(id="t", input="x", model="acme/x")])
        )


def test_a_provider_timeout_error_keeps_its_own_message() -> None:
    from trialkit.models import RetryPolicy

    report = run_sync(
        Suite(
            id="s",
            model=ScriptedModel("t", [TimeoutError("upstream read timed out")]),
            tasks=[Task(id="t", input="x")],
        ),
        retry=RetryPolicy(attempts=2, base_delay=0.001),
    )
    error = report.tasks[0].results[0].error
    assert error is not None
    assert error.message == "scripted/t: gave up after 2 attempts: upstream read timed out"


def test_a_tasks_config_and_response_format_reach_the_model() -> None:
    from trialkit.models import ResponseFormat

    seen: list[ModelRequest] = []

    def respond(request: ModelRequest, trial: int) -> str:
        seen.append(request)
        return '{"city": "Paris"}'

    schema = {"type": "object", "required": ["city"]}
    suite = Suite(
        id="s",
        model=ScriptedModel("spy", respond),
        config=GenerationConfig(temperature=0.9),
        tasks=[
            Task(
                id="json",
                input="City?",
                config=GenerationConfig(temperature=0),
                response_format=ResponseFormat(json_schema=schema),
                graders=[graders.valid_json(schema=schema)],
            ),
            Task(id="plain", input="City?"),
        ],
    )
    report = run_sync(suite, concurrency=1)
    assert report.task("json").verdict == "pass"
    json_request, plain_request = seen
    assert json_request.config.temperature == 0
    assert json_request.response_format == ResponseFormat(json_schema=schema)
    assert plain_request.config.temperature == 0.9
    assert plain_request.response_format is None
