"""The built-in tool-calling agent: a model, Python functions as tools, and the loop."""

from __future__ import annotations

import pytest

from trialkit import GradeContext, Suite, Task, Transcript, Turns, run_sync
from trialkit.harness.base import TrialContext
from trialkit.harness.tool_agent import ToolAgent
from trialkit.harness.tools import GiveUp
from trialkit.models import ModelRequest, ScriptedModel
from trialkit.models.base import ForceTool
from trialkit.transcript import Message, ToolCall


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


class Run:
    """Runs a one-task suite and keeps the trial's transcript and the model's requests."""

    def __init__(self) -> None:
        self.transcripts: list[Transcript] = []
        self.requests: list[ModelRequest] = []

    def grade(self, ctx: GradeContext) -> bool:
        self.transcripts.append(ctx.transcript)
        return True

    def spy(self, script: list[str | ToolCall | list[ToolCall]]) -> ScriptedModel:
        steps = iter(script)

        def respond(request: ModelRequest, trial: int) -> str | ToolCall | list[ToolCall]:
            self.requests.append(request)
            return next(steps)

        return ScriptedModel("spy", respond)

    def __call__(self, agent: ToolAgent, task_input: str | Turns = "go") -> Transcript:
        suite = Suite(
            id="s", harness=agent, tasks=[Task(id="t", input=task_input, graders=[self.grade])]
        )
        report = run_sync(suite)
        assert report.tasks[0].verdict in ("pass", "fail"), report.tasks[0]
        (transcript,) = self.transcripts
        return transcript


def call(name: str, call_id: str = "c1", **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def roles(messages: list[Message]) -> list[str]:
    return [m.role for m in messages]


def test_a_two_step_tool_loop() -> None:
    run = Run()
    agent = ToolAgent(run.spy([call("add", a=2, b=3), "5"]), [add], system="Use tools.")
    transcript = run(agent, "what is 2 + 3?")

    assert [t.output for t in transcript.turns] == ["5"]
    (done,) = transcript.tool_calls
    assert (done.id, done.name, done.arguments) == ("c1", "add", {"a": 2, "b": 3})
    assert (done.result, done.is_error) == ("5", False)
    assert done.duration_s is not None and done.started_at is not None
    assert roles(transcript.messages) == ["user", "assistant", "tool", "assistant"]
    assert transcript.messages[2] == Message(
        role="tool", content="5", name="add", tool_call_id="c1"
    )
    assert transcript.messages[3].content == "5"
    assert len(transcript.model_calls) == 2

    first, second = run.requests
    assert [t.name for t in first.tools] == ["add"]
    assert first.tools[0].parameters["required"] == ["a", "b"]
    assert roles(first.messages) == ["system", "user"]
    assert roles(second.messages) == ["system", "user", "assistant", "tool"]
    assert second.messages[3].content == "5"


def test_async_tools_and_several_calls_in_one_step() -> None:
    run = Run()
    agent = ToolAgent(
        run.spy([[call("shout", "c1", text="hi"), call("add", "c2", a=1, b=1)], "done"]),
        [add, shout],
    )
    transcript = run(agent)
    assert [(c.id, c.result, c.is_error) for c in transcript.tool_calls] == [
        ("c1", "HI", False),
        ("c2", "2", False),
    ]
    assert [(m.tool_call_id, m.content) for m in run.requests[1].messages if m.role == "tool"] == [
        ("c1", "HI"),
        ("c2", "2"),
    ]


def test_a_tool_that_raises_sends_the_error_back_and_the_loop_goes_on() -> None:
    run = Run()
    agent = ToolAgent(run.spy([call("fail", reason="disk full"), "sorry"]), [fail])
    transcript = run(agent)

    (failed,) = transcript.tool_calls
    assert failed.is_error
    assert failed.result == "RuntimeError: disk full"
    tool_message = run.requests[1].messages[-1]
    assert tool_message == Message(
        role="tool", content="RuntimeError: disk full", name="fail", tool_call_id="c1"
    )
    assert transcript.turns[0].output == "sorry"
    assert not transcript.turns[0].is_error


def test_an_unknown_tool_gets_an_error_result() -> None:
    run = Run()
    agent = ToolAgent(run.spy([call("delete_everything"), "ok"]), [add])
    transcript = run(agent)
    (unknown,) = transcript.tool_calls
    assert unknown.is_error
    assert unknown.result == "no tool named 'delete_everything'; the tools are: add"
    assert run.requests[1].messages[-1].content == unknown.result
    assert transcript.turns[0].output == "ok"


def test_arguments_of_the_wrong_type_get_an_error_result() -> None:
    run = Run()
    agent = ToolAgent(run.spy([call("add", a="two", b=3), call("add", "c2", a=2, b=3), "5"]), [add])
    transcript = run(agent)
    bad, good = transcript.tool_calls
    assert bad.is_error
    assert bad.result == (
        "invalid arguments for add: a: Input should be a valid integer, unable to parse "
        "string as an integer"
    )
    assert run.requests[1].messages[-1].content == bad.result
    assert (good.result, good.is_error) == ("5", False)
    assert transcript.turns[0].output == "5"


def test_max_turns_stops_the_loop_with_an_error() -> None:
    run = Run()
    agent = ToolAgent(
        run.spy([call("add", f"c{i}", a=i, b=0) for i in range(5)]), [add], max_turns=3
    )
    transcript = run(agent)
    assert len(run.requests) == 3
    (turn,) = transcript.turns
    assert turn.is_error
    assert [(c.id, c.result, c.is_error) for c in transcript.tool_calls] == [
        ("c0", "0", False),
        ("c1", "1", False),
        ("c2", "not run: the agent stopped after 3 model turns", True),
    ]
    # every call is answered, so the conversation stays valid for a provider
    assert roles(transcript.messages) == ["user", *["assistant", "tool"] * 3]


def test_max_turns_failure_reaches_the_outcome() -> None:
    agent = ToolAgent(ScriptedModel("loop", [call("add", a=1, b=1)]), [add], max_turns=2)
    failures: list[str | None] = []

    def grade(ctx: GradeContext) -> bool:
        failures.append(ctx.outcome.failure)
        return True

    report = run_sync(
        Suite(id="s", harness=agent, tasks=[Task(id="t", input="go", graders=[grade])])
    )
    (trial,) = report.tasks[0].results
    assert trial.failed
    assert failures == ["stopped after 2 model turns without a final answer"]


def test_history_persists_across_turns() -> None:
    run = Run()
    agent = ToolAgent(run.spy([call("add", a=2, b=3), "5", "10"]), [add])
    transcript = run(agent, Turns("2 + 3?", "and doubled?"))
    assert [t.output for t in transcript.turns] == ["5", "10"]
    assert roles(run.requests[2].messages) == ["user", "assistant", "tool", "assistant", "user"]
    assert [c.turn for c in transcript.tool_calls] == [0]
    assert roles(transcript.messages) == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


def test_tool_choice_applies_to_the_first_call_of_a_turn() -> None:
    run = Run()
    agent = ToolAgent(
        run.spy([call("add", a=1, b=2), "3"]), [add], tool_choice=ForceTool(name="add")
    )
    run(agent)
    assert [r.tool_choice for r in run.requests] == [ForceTool(name="add"), None]


def test_the_trial_model_is_used_without_one_of_its_own() -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest, trial: int) -> str:
        seen.append(request)
        return "hi"

    suite = Suite(
        id="s",
        model=ScriptedModel("spy", respond),
        system="Be brief.",
        harness=ToolAgent(tools=[add]),
        tasks=[Task(id="t", input="hello")],
    )
    report = run_sync(suite)
    assert report.tasks[0].results[0].output == "hi"
    assert roles(seen[0].messages) == ["system", "user"]
    assert [t.name for t in seen[0].tools] == ["add"]


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        ToolAgent("scripted/x", [add], max_turns=0)
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        ToolAgent("scripted/x", [add, add])
    with pytest.raises(TypeError, match=r"\*args"):
        ToolAgent("scripted/x", [print])


def test_tools_that_take_the_trial_context_get_the_trials() -> None:
    seen: list[tuple[str, int]] = []

    def where(ctx: TrialContext) -> str:
        """Which trial is this?"""
        seen.append((ctx.task.id, ctx.trial_index))
        return "here"

    run = Run()
    transcript = run(ToolAgent(run.spy([call("where"), "done"]), [where]))
    assert seen == [("t", 0)]
    assert transcript.tool_calls[0].result == "here"
    assert "ctx" not in run.requests[0].tools[0].parameters["properties"]


def test_a_tool_that_gives_up_ends_the_turn_as_a_reported_failure() -> None:
    def give_up(reason: str) -> str:
        """Say the task cannot be done."""
        raise GiveUp(reason)

    run = Run()
    agent = ToolAgent(
        run.spy([[call("give_up", "c1", reason="no such area"), call("add", "c2", a=1, b=2)]]),
        [give_up, add],
    )
    transcript = run(agent)
    assert [(c.name, c.result, c.is_error) for c in transcript.tool_calls] == [
        ("give_up", "gave up: no such area", False),
        ("add", "not run: an earlier tool call gave up the turn", True),
    ]
    (turn,) = transcript.turns
    assert turn.is_error
    assert len(run.requests) == 1  # the model is not asked again


def test_giving_up_is_the_expected_failure_of_an_impossible_task() -> None:
    def give_up(reason: str) -> str:
        """Say the task cannot be done."""
        raise GiveUp(reason)

    agent = ToolAgent(ScriptedModel("m", [call("give_up", reason="impossible")]), [give_up])
    suite = Suite(
        id="s",
        harness=agent,
        tasks=[
            Task(
                id="t",
                input="Divide by zero.",
                expect="failure",
                graders=[lambda ctx: ctx.outcome.failed and ctx.outcome.failure == "impossible"],
            )
        ],
    )
    assert run_sync(suite).tasks[0].verdict == "pass"
