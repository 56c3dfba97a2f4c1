import re
from typing import Any

import anyio
import pytest

from trialkit import GradeContext, Outcome, Score, Task, Transcript, Verdict
from trialkit.graders.base import Grader, run_grader
from trialkit.graders.tools import (
    max_tool_calls,
    max_turns,
    no_tool_errors,
    pair_tool_calls,
    tool_called,
    tool_not_called,
    tool_order,
)
from trialkit.transcript import Message, ModelCall, ToolCall


def call(name: str, i: int = 0, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"c{i}", name=name, arguments=arguments)


def grade(g: Grader, *calls: ToolCall, **transcript: Any) -> Score:
    ctx = GradeContext(
        task=Task(id="t", input="x"),
        trial_index=0,
        transcript=Transcript(tool_calls=list(calls), **transcript),
        outcome=Outcome(),
    )
    return anyio.run(run_grader, g, ctx)


READ = call("Read", 1, path="src/app.py", limit=100)
GREP = call("Grep", 2, pattern="TODO")
EDIT = call("Edit", 3, path="src/app.py", old="a", new="b")


def test_tool_called_passes_and_lists_the_calls() -> None:
    s = grade(tool_called("Read"), READ, EDIT)
    assert s.verdict is Verdict.PASS
    assert s.name == "tool_called('Read')"
    assert (
        s.rationale == "1 calls to 'Read'; calls to 'Read' seen: Read(path='src/app.py', limit=100)"
    )


def test_tool_called_fails_when_missing_and_shows_the_tools_called() -> None:
    s = grade(tool_called(name="Write"), READ, EDIT)
    assert s.verdict is Verdict.FAIL
    assert s.rationale == "0 calls to 'Write'; tools called: Read → Edit"
    assert (
        grade(tool_called("Write")).rationale == "0 calls to 'Write'; tools called: (no tool calls)"
    )


def test_tool_called_args_are_a_subset_match_with_predicates_regex_and_types() -> None:
    assert grade(tool_called("Read", {"path": "src/app.py"}), READ).passed
    assert grade(tool_called("Read", {"path": re.compile(r"\.py$")}), READ).passed
    assert grade(tool_called("Read", {"limit": lambda n: n <= 100}), READ).passed
    assert grade(tool_called("Read", {"limit": int}), READ).passed
    s = grade(tool_called("Read", {"path": re.compile(r"\.md$")}), READ)
    assert s.verdict is Verdict.FAIL
    assert s.rationale is not None
    assert s.rationale.startswith("0 matching calls to 'Read'; calls to 'Read' seen: Read(path=")
    assert not grade(tool_called("Read", {"limit": lambda n: n > 100}), READ).passed
    assert not grade(tool_called("Read", {"offset": 0}), READ).passed  # key missing
    assert not grade(tool_called("Read", {"limit": re.compile("1")}), READ).passed  # not a str
    assert not grade(tool_called("Read", {"limit": str}), READ).passed


def test_tool_called_times_is_exact() -> None:
    reads = [call("Read", i, path=f"f{i}") for i in range(3)]
    assert grade(tool_called("Read", times=3), *reads).passed
    s = grade(tool_called("Read", times=2), *reads)
    assert s.verdict is Verdict.FAIL
    assert s.rationale is not None
    assert s.rationale.startswith("3 calls to 'Read' (expected exactly 2)")
    assert grade(tool_called("Read", {"path": "f1"}, times=1), *reads).passed
    assert grade(tool_called("Write", times=0), *reads).passed
    assert grade(tool_called("Read", times=2), *reads).name == "tool_called('Read', times=2)"
    with pytest.raises(ValueError, match="times"):
        tool_called("Read", times=-1)


def test_tool_not_called() -> None:
    assert grade(tool_not_called("Bash"), READ).passed
    s = grade(tool_not_called("Read"), READ, READ)
    assert s.verdict is Verdict.FAIL
    assert s.rationale is not None
    assert s.rationale.startswith("'Read' was called 2 time(s): Read(path=")


def test_tool_order_allows_calls_in_between() -> None:
    s = grade(tool_order("Read", "Edit"), READ, GREP, EDIT)
    assert s.verdict is Verdict.PASS
    assert s.rationale == "order: Read → Grep → Edit"
    assert grade(tool_order("Read", "Read", "Edit"), READ, GREP, READ, EDIT).passed
    assert s.name == "tool_order('Read', 'Edit')"


def test_tool_order_fails_out_of_order_and_shows_the_actual_order() -> None:
    s = grade(tool_order("Read", "Edit"), EDIT, GREP, READ)
    assert s.verdict is Verdict.FAIL
    assert s.rationale == "no call to 'Edit' after 'Read'; actual order: Edit → Grep → Read"
    s = grade(tool_order("Read", "Edit"), GREP)
    assert s.rationale == "no call to 'Read'; actual order: Grep"
    assert not grade(tool_order("Read", "Read"), READ, EDIT).passed
    with pytest.raises(ValueError, match="at least one"):
        tool_order()


def test_max_tool_calls() -> None:
    assert grade(max_tool_calls(3), READ, GREP, EDIT).passed
    s = grade(max_tool_calls(2), READ, GREP, EDIT)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "3 tool calls (at most 2 allowed)")
    s = grade(max_tool_calls(1, "Read"), READ, GREP, READ)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "2 calls to 'Read' (at most 1 allowed)")
    assert grade(max_tool_calls(1, name="Edit"), READ, GREP, EDIT).passed
    with pytest.raises(ValueError, match="n must be"):
        max_tool_calls(-1)


def test_max_turns_counts_the_agents_model_calls_not_the_judges() -> None:
    calls = [ModelCall(model="m"), ModelCall(model="m"), ModelCall(model="j", role="grader")]
    assert grade(max_turns(2), model_calls=calls).passed
    s = grade(max_turns(1), model_calls=calls)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "2 agent model turns (at most 1 allowed)")


def test_max_turns_falls_back_to_assistant_messages() -> None:
    messages = [
        Message(role="user", content="q"),
        Message(role="assistant", content="a"),
        Message(role="assistant", content="b"),
    ]
    assert grade(max_turns(2), messages=messages).passed
    assert not grade(max_turns(1), messages=messages).passed
    assert grade(max_turns(0)).passed


def test_no_tool_errors() -> None:
    assert grade(no_tool_errors(), READ, EDIT).passed
    bad = ToolCall(id="c9", name="Bash", result="exit 1: boom", is_error=True)
    s = grade(no_tool_errors(), READ, bad)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "1 tool error(s): Bash [c9]: exit 1: boom")


def test_pair_tool_calls_pairs_by_id_and_falls_back_to_the_calls_result() -> None:
    a = ToolCall(id="a", name="Read", result="ignored: the message wins")
    b = ToolCall(id="b", name="Grep", result="3 matches")
    c = ToolCall(id="c", name="Edit")
    answer_a = Message(role="tool", content="file text", tool_call_id="a", name="Read")
    transcript = Transcript(
        tool_calls=[a, b, c],
        messages=[
            Message(role="assistant", tool_calls=[a, b, c]),
            Message(role="tool", content="other", tool_call_id="zzz"),
            answer_a,
        ],
    )
    pairs = pair_tool_calls(transcript)
    assert [p[0].id for p in pairs] == ["a", "b", "c"]
    assert pairs[0][1] == answer_a
    fallback = pairs[1][1]
    assert fallback is not None
    assert (fallback.role, fallback.content, fallback.tool_call_id, fallback.name) == (
        "tool",
        "3 matches",
        "b",
        "Grep",
    )
    assert pairs[2][1] is None
    assert pair_tool_calls(Transcript()) == []
