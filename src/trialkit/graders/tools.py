"""Code graders over the transcript: which tools the agent called, in what order, how often.

All of them read `ctx.transcript`, which trialkit records itself (the agent cannot forge it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trialkit.graders.base import GradeContext, Grader
from trialkit.score import Score
from trialkit.transcript import Message, ToolCall, Transcript

_MAX_LISTED = 10


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe_call(call: ToolCall) -> str:
    args = ", ".join(f"{k}={_short(repr(v), 40)}" for k, v in call.arguments.items())
    return f"{call.name}({args})"


def _list_calls(calls: list[ToolCall]) -> str:
    if not calls:
        return "none"
    shown = [_describe_call(c) for c in calls[:_MAX_LISTED]]
    if len(calls) > _MAX_LISTED:
        shown.append(f"… and {len(calls) - _MAX_LISTED} more")
    return "; ".join(shown)


def _order(names: list[str]) -> str:
    if not names:
        return "(no tool calls)"
    if len(names) > 3 * _MAX_LISTED:
        return " → ".join(names[: 3 * _MAX_LISTED]) + f" → … ({len(names)} calls)"
    return " → ".join(names)


def _value_matches(expected: Any, actual: Any) -> bool:
    """One expected argument value against the actual one.

    A type checks `isinstance`; a compiled regex searches a string value; any other callable is a
    predicate; everything else compares with `==`.
    """
    if isinstance(expected, type):
        return isinstance(actual, expected)
    if isinstance(expected, re.Pattern):
        return isinstance(actual, str) and expected.search(actual) is not None
    if callable(expected):
        return bool(expected(actual))
    return bool(expected == actual)


def args_match(expected: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
    """Whether `arguments` hold every key of `expected` with a matching value (a subset match)."""
    return all(
        key in arguments and _value_matches(v, arguments[key]) for key, v in expected.items()
    )


def pair_tool_calls(transcript: Transcript) -> list[tuple[ToolCall, Message | None]]:
    """Each tool call, in order, with the `tool` message that answers it (matched by id).

    When the transcript holds no such message but the call carries its own `result`, a `tool`
    message is made from that result; the second item is `None` only when no result was seen.
    """
    answers: dict[str, Message] = {}
    for message in transcript.messages:
        if message.role == "tool" and message.tool_call_id is not None:
            answers.setdefault(message.tool_call_id, message)
    pairs: list[tuple[ToolCall, Message | None]] = []
    for call in transcript.tool_calls:
        answer = answers.get(call.id)
        if answer is None and call.result is not None:
            answer = Message(role="tool", content=call.result, name=call.name, tool_call_id=call.id)
        pairs.append((call, answer))
    return pairs


@dataclass(init=False)
class tool_called(Grader):
    """The agent called the tool `name` (with matching `args`; exactly `times` times if given).

    `args` is a subset match: every key given must be among the call's arguments, and its value
    must match: a type checks `isinstance`, a compiled regex (`re.compile(...)`) searches a string,
    a callable is a predicate, anything else compares with `==`. Other arguments are ignored.
    Without `times`, one matching call is enough.
    """

    tool: str
    args: Mapping[str, Any] | None
    times: int | None

    def __init__(
        self, name: str, args: Mapping[str, Any] | None = None, *, times: int | None = None
    ) -> None:
        if times is not None and times < 0:
            raise ValueError(f"tool_called: times must be >= 0, got {times}")
        self.tool, self.args, self.times = name, args, times

    @property
    def name(self) -> str:
        parts = [repr(self.tool)]
        if self.args:
            parts.append("args=" + ", ".join(sorted(self.args)))
        if self.times is not None:
            parts.append(f"times={self.times}")
        return f"tool_called({', '.join(parts)})"

    def grade(self, ctx: GradeContext) -> Score:
        calls = ctx.transcript.calls_to(self.tool)
        matching = [c for c in calls if self.args is None or args_match(self.args, c.arguments)]
        ok = len(matching) >= 1 if self.times is None else len(matching) == self.times
        what = "matching calls" if self.args else "calls"
        head = f"{len(matching)} {what} to {self.tool!r}"
        if self.times is not None:
            head += f" (expected exactly {self.times})"
        if calls:
            seen = f"calls to {self.tool!r} seen: {_list_calls(calls)}"
        else:
            seen = f"tools called: {_order([c.name for c in ctx.transcript.tool_calls])}"
        return Score.from_bool(ok, rationale=f"{head}; {seen}")


@dataclass(init=False)
class tool_not_called(Grader):
    """The agent never called the tool `name`."""

    tool: str

    def __init__(self, name: str) -> None:
        self.tool = name

    @property
    def name(self) -> str:
        return f"tool_not_called({self.tool!r})"

    def grade(self, ctx: GradeContext) -> Score:
        calls = ctx.transcript.calls_to(self.tool)
        if not calls:
            return Score.from_bool(True)
        return Score.from_bool(
            False, rationale=f"{self.tool!r} was called {len(calls)} time(s): {_list_calls(calls)}"
        )


@dataclass(init=False)
class tool_order(Grader):
    """The agent called these tools in this order; other calls may come between them.

    `tool_order("Read", "Edit")` passes for Read → Grep → Edit, fails for Edit → Read.
    """

    tools: tuple[str, ...]

    def __init__(self, *names: str) -> None:
        if not names:
            raise ValueError("tool_order: give at least one tool name")
        self.tools = names

    @property
    def name(self) -> str:
        return f"tool_order({', '.join(repr(t) for t in self.tools)})"

    def grade(self, ctx: GradeContext) -> Score:
        actual = [c.name for c in ctx.transcript.tool_calls]
        found = 0
        for name in actual:
            if found < len(self.tools) and name == self.tools[found]:
                found += 1
        if found == len(self.tools):
            return Score.from_bool(True, rationale=f"order: {_order(actual)}")
        missing = self.tools[found]
        after = f" after {self.tools[found - 1]!r}" if found else ""
        return Score.from_bool(
            False, rationale=f"no call to {missing!r}{after}; actual order: {_order(actual)}"
        )


@dataclass(init=False)
class max_tool_calls(Grader):
    """The agent made at most `n` tool calls (of the tool `name` only, when given)."""

    n: int
    tool: str | None

    def __init__(self, n: int, name: str | None = None) -> None:
        if n < 0:
            raise ValueError(f"max_tool_calls: n must be >= 0, got {n}")
        self.n, self.tool = n, name

    @property
    def name(self) -> str:
        of = "" if self.tool is None else f", {self.tool!r}"
        return f"max_tool_calls({self.n}{of})"

    def grade(self, ctx: GradeContext) -> Score:
        calls = ctx.transcript.tool_calls
        if self.tool is not None:
            calls = [c for c in calls if c.name == self.tool]
        what = "tool calls" if self.tool is None else f"calls to {self.tool!r}"
        ok = len(calls) <= self.n
        return Score.from_bool(ok, rationale=f"{len(calls)} {what} (at most {self.n} allowed)")


def count_agent_turns(transcript: Transcript) -> int:
    """The agent's model calls: recorded model calls with role `agent`, or, when the transcript
    records none (an agent that calls its model outside trialkit), its `assistant` messages."""
    calls = sum(1 for c in transcript.model_calls if c.role == "agent")
    if calls:
        return calls
    return sum(1 for m in transcript.messages if m.role == "assistant")


@dataclass
class max_turns(Grader):
    """The agent took at most `n` turns, a turn being one call of the agent's model.

    Counts model calls with role `agent` in the transcript (a judge's calls do not count); for
    agents whose model calls trialkit did not record, counts `assistant` messages instead. User
    turns (`Turns(...)`) are fixed by the task, so they are not what this limits.
    """

    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"max_turns: n must be >= 0, got {self.n}")

    @property
    def name(self) -> str:
        return f"max_turns({self.n})"

    def grade(self, ctx: GradeContext) -> Score:
        turns = count_agent_turns(ctx.transcript)
        return Score.from_bool(
            turns <= self.n, rationale=f"{turns} agent model turns (at most {self.n} allowed)"
        )


@dataclass
class no_tool_errors(Grader):
    """No tool call ended in an error."""

    @property
    def name(self) -> str:
        return "no_tool_errors"

    def grade(self, ctx: GradeContext) -> Score:
        failed = [c for c in ctx.transcript.tool_calls if c.is_error]
        if not failed:
            return Score.from_bool(True)
        shown = [
            f"{c.name} [{c.id}]: {_short(c.result or '(no message)')}" for c in failed[:_MAX_LISTED]
        ]
        more = f"; … and {len(failed) - _MAX_LISTED} more" if len(failed) > _MAX_LISTED else ""
        return Score.from_bool(
            False, rationale=f"{len(failed)} tool error(s): " + "; ".join(shown) + more
        )
