"""Two trials of one task compared: aligned turn by turn, with what differs marked.

`diff_trials` builds a `TrialDiff` (data: what `--json` prints); `render_diff` draws it with the
pieces of `reports/transcript.py`. Marks are characters as well as colours: `~` changed,
`-` only in A, `+` only in B; changed text shows `[-removed-]{+added+}` words or a line diff.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import zip_longest
from typing import Any, Literal

from pydantic import Field
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from trialkit._record import Record
from trialkit.outcome import Artifact, FileChange, Outcome
from trialkit.reports import _format as f
from trialkit.reports.transcript import (
    ROLE_STYLES,
    TurnView,
    artifact_facts,
    call_line,
    compact_json,
    diff_line,
    file_facts,
    indented,
    plain,
    plural,
    run_label,
    section,
    turns_of,
    verdict_text,
)
from trialkit.score import Assertion, Verdict
from trialkit.transcript import Message, ToolCall, Usage
from trialkit.trial import Trial, TrialStatus

DIFF_SCHEMA_VERSION = 1
ONE_LINE_CHARS = 90
"""How much of an unchanged message or a one-sided tool result a diff shows."""

Change = Literal["same", "changed", "only_a", "only_b"]

_WORDS = re.compile(r"\S+|\s+")
_MARKS: dict[Change, tuple[str, str]] = {
    "same": (" ", "dim"),
    "changed": ("~", "yellow"),
    "only_a": ("-", "red"),
    "only_b": ("+", "green"),
}


class TextDiff(Record):
    """A message or an output on either side."""

    change: Change
    role: str | None = None
    a: str | None = None
    b: str | None = None


class ToolCallDiff(Record):
    """The tool calls at one position of a turn; call ids and timings are not compared."""

    change: Change
    position: int
    fields: list[str] = Field(default_factory=list)
    """What differs: `name`, `arguments`, `result`, `is_error`."""
    a: ToolCall | None = None
    b: ToolCall | None = None


class TurnDiff(Record):
    index: int
    change: Change
    messages: list[TextDiff]
    tool_calls: list[ToolCallDiff]


class ValueDiff(Record):
    """A flag, a state fact, a file change or an artifact on either side."""

    key: str
    change: Change
    a: Any = None
    b: Any = None


class OutcomeDiff(Record):
    output: TextDiff
    failed: ValueDiff
    failure: TextDiff
    state: list[ValueDiff]
    files: list[ValueDiff]
    """By path; `a` and `b` are `FileChange`s."""
    artifacts: list[ValueDiff]
    """By path; `a` and `b` are `Artifact`s."""

    def items(self) -> list[TextDiff | ValueDiff]:
        return [self.output, self.failed, self.failure, *self.state, *self.files, *self.artifacts]


class CheckSide(Record):
    verdict: Verdict
    value: float | None = None
    rationale: str | None = None


class CheckDiff(Record):
    """A score, or one of its sub-assertions, matched by name."""

    name: str
    change: Change
    fields: list[str] = Field(default_factory=list)
    """What differs: `verdict`, `value`, `rationale`, `assertions`."""
    a: CheckSide | None = None
    b: CheckSide | None = None
    assertions: list[CheckDiff] = Field(default_factory=list)


class TrialSide(Record):
    run_id: str
    run_name: str | None = None
    verdict: Verdict
    status: TrialStatus
    model: str | None
    duration_s: float
    usage: Usage
    grader_usage: Usage
    cost_usd: float | None
    error: str | None
    """The trial's error, as one line."""


class TrialDiff(Record):
    """Two trials of one task aligned turn by turn, with what differs marked."""

    schema_version: int = DIFF_SCHEMA_VERSION
    task_id: str
    trial: int
    a: TrialSide
    b: TrialSide
    same: bool
    """No difference in verdict, status, error, messages, tool calls, outcome or scores
    (ids, timings, tokens and cost are shown, not compared)."""
    turns: list[TurnDiff]
    outcome: OutcomeDiff
    scores: list[CheckDiff]


def _change(in_a: bool, in_b: bool, differ: bool) -> Change:
    if not in_b:
        return "only_a"
    if not in_a:
        return "only_b"
    return "changed" if differ else "same"


def _side(trial: Trial, run_name: str | None) -> TrialSide:
    return TrialSide(
        run_id=trial.run_id,
        run_name=run_name,
        verdict=trial.verdict,
        status=trial.status,
        model=trial.model,
        duration_s=trial.duration_s,
        usage=trial.usage,
        grader_usage=trial.grader_usage,
        cost_usd=trial.cost_usd,
        error=None if trial.error is None else f.error_text(trial.error),
    )


def diff_trials(
    a: Trial, b: Trial, *, run_names: tuple[str | None, str | None] = (None, None)
) -> TrialDiff:
    """Align `a` and `b` turn by turn (difflib over each turn's messages; tool calls by their
    position in the turn) and compare their outcomes and their scores (by name)."""
    pairs = zip_longest(turns_of(a.transcript), turns_of(b.transcript))
    turns = [_diff_turn(i, va, vb) for i, (va, vb) in enumerate(pairs)]
    outcome = _diff_outcome(a.outcome, b.outcome)
    scores = _diff_checks(
        [s.as_assertion() for s in a.scores], [s.as_assertion() for s in b.scores]
    )
    side_a, side_b = _side(a, run_names[0]), _side(b, run_names[1])
    changes = {x.change for x in [*turns, *outcome.items(), *scores]}
    same = changes <= {"same"} and _ending(side_a) == _ending(side_b)
    return TrialDiff(
        task_id=a.task_id,
        trial=a.index,
        a=side_a,
        b=side_b,
        same=same,
        turns=turns,
        outcome=outcome,
        scores=scores,
    )


def _ending(side: TrialSide) -> tuple[Verdict, TrialStatus, str | None]:
    return side.verdict, side.status, side.error


def _comparable(view: TurnView | None) -> list[Message]:
    """The messages a diff aligns: tool results are compared with their calls instead."""
    if view is None:
        return []
    known = view.known_call_ids()
    return [
        m
        for m in view.inputs + view.replies
        if m.content and not (m.role == "tool" and m.tool_call_id in known)
    ]


def _opcodes(a: Sequence[Any], b: Sequence[Any]) -> Sequence[tuple[str, int, int, int, int]]:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def _diff_messages(ma: list[Message], mb: list[Message]) -> Iterator[TextDiff]:
    keys_a, keys_b = [(m.role, m.content) for m in ma], [(m.role, m.content) for m in mb]
    for tag, i1, i2, j1, j2 in _opcodes(keys_a, keys_b):
        if tag == "equal":
            for x, y in zip(ma[i1:i2], mb[j1:j2], strict=True):
                yield TextDiff(change="same", role=x.role, a=x.content, b=y.content)
        else:
            yield from _pair_by_role(ma[i1:i2], mb[j1:j2])


def _pair_by_role(xs: list[Message], ys: list[Message]) -> Iterator[TextDiff]:
    """Messages that differ, paired in order with a message of the same role when there is one
    (a changed message), else on one side only."""
    for tag, i1, i2, j1, j2 in _opcodes([m.role for m in xs], [m.role for m in ys]):
        if tag == "equal":
            for x, y in zip(xs[i1:i2], ys[j1:j2], strict=True):
                yield TextDiff(change="changed", role=x.role, a=x.content, b=y.content)
            continue
        for x in xs[i1:i2]:
            yield TextDiff(change="only_a", role=x.role, a=x.content)
        for y in ys[j1:j2]:
            yield TextDiff(change="only_b", role=y.role, b=y.content)


def _diff_call(position: int, x: ToolCall | None, y: ToolCall | None) -> ToolCallDiff:
    fields = []
    if x is not None and y is not None:
        names = ("name", "arguments", "result", "is_error")
        fields = [n for n in names if getattr(x, n) != getattr(y, n)]
    change = _change(x is not None, y is not None, bool(fields))
    return ToolCallDiff(change=change, position=position, fields=fields, a=x, b=y)


def _diff_turn(index: int, va: TurnView | None, vb: TurnView | None) -> TurnDiff:
    messages = list(_diff_messages(_comparable(va), _comparable(vb)))
    calls = zip_longest(va.tool_calls if va else [], vb.tool_calls if vb else [])
    tool_calls = [_diff_call(i, x, y) for i, (x, y) in enumerate(calls)]
    differ = any(m.change != "same" for m in messages) or any(
        c.change != "same" for c in tool_calls
    )
    change = _change(va is not None, vb is not None, differ)
    return TurnDiff(index=index, change=change, messages=messages, tool_calls=tool_calls)


def _keyed(a: dict[str, Any], b: dict[str, Any]) -> list[ValueDiff]:
    return [
        ValueDiff(
            key=key,
            change=_change(key in a, key in b, a.get(key) != b.get(key)),
            a=a.get(key),
            b=b.get(key),
        )
        for key in [*a, *(k for k in b if k not in a)]
    ]


def _files(outcome: Outcome) -> dict[str, Any]:
    return {change.path: change for change in (outcome.diff.files if outcome.diff else [])}


def _diff_outcome(a: Outcome, b: Outcome) -> OutcomeDiff:
    return OutcomeDiff(
        output=TextDiff(change=_change(True, True, a.output != b.output), a=a.output, b=b.output),
        failed=ValueDiff(
            key="failed", change=_change(True, True, a.failed != b.failed), a=a.failed, b=b.failed
        ),
        failure=TextDiff(
            change=_change(True, True, a.failure != b.failure), a=a.failure, b=b.failure
        ),
        state=_keyed(a.state, b.state),
        files=_keyed(_files(a), _files(b)),
        artifacts=_keyed({x.path: x for x in a.artifacts}, {x.path: x for x in b.artifacts}),
    )


def _named(checks: Sequence[Assertion]) -> dict[str, Assertion]:
    """Checks by name; a repeated name is told apart by its occurrence (`name #2`)."""
    named: dict[str, Assertion] = {}
    for check in checks:
        name = key = check.name or "(unnamed)"
        n = 2
        while key in named:
            key, n = f"{name} #{n}", n + 1
        named[key] = check
    return named


def _check_side(check: Assertion | None) -> CheckSide | None:
    if check is None:
        return None
    return CheckSide(verdict=check.verdict, value=check.value, rationale=check.rationale)


def _diff_checks(a: Sequence[Assertion], b: Sequence[Assertion]) -> list[CheckDiff]:
    named_a, named_b = _named(a), _named(b)
    diffs = []
    for key in [*named_a, *(k for k in named_b if k not in named_a)]:
        x, y = named_a.get(key), named_b.get(key)
        parts = _diff_checks(x.assertions if x else [], y.assertions if y else [])
        fields = []
        if x is not None and y is not None:
            fields = [
                n for n in ("verdict", "value", "rationale") if getattr(x, n) != getattr(y, n)
            ]
            if any(p.change != "same" for p in parts):
                fields.append("assertions")
        diffs.append(
            CheckDiff(
                name=key,
                change=_change(x is not None, y is not None, bool(fields)),
                fields=fields,
                a=_check_side(x),
                b=_check_side(y),
                assertions=parts,
            )
        )
    return diffs


# -- rendering ---------------------------------------------------------------------------------


def word_diff(a: str, b: str) -> Text:
    """`a` changed into `b`, with `[-removed-]` and `{+added+}` words (git's word-diff marks)."""
    ta, tb = _WORDS.findall(a), _WORDS.findall(b)
    text = Text()
    for tag, i1, i2, j1, j2 in _opcodes(ta, tb):
        if tag == "equal":
            text.append_text(plain("".join(ta[i1:i2])))
            continue
        if i2 > i1:
            text.append_text(plain("[-" + "".join(ta[i1:i2]) + "-]", "bold red"))
        if j2 > j1:
            text.append_text(plain("{+" + "".join(tb[j1:j2]) + "+}", "bold green"))
    return text


def line_diff(a: str, b: str) -> list[Text]:
    """A unified diff of the lines of `a` and `b` with two lines of context (without its `@@`
    line when it has a single hunk)."""
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=2))[2:]
    if sum(line.startswith("@@") for line in lines) == 1:
        lines = lines[1:]
    return [diff_line(line) for line in lines]


def _changed_text(label: Text, a: str, b: str, indent: int) -> list[RenderableType]:
    if "\n" in a or "\n" in b:
        return [indented(label, indent), *(indented(line, indent + 2) for line in line_diff(a, b))]
    return [indented(Text.assemble(label, " ", word_diff(a, b)), indent)]


def _marked(change: Change, *body: Text | str) -> Text:
    mark, style = _MARKS[change]
    return Text.assemble((f"{mark} ", style), *body)


def _one_line(text: str) -> str:
    lines = text.splitlines() or [""]
    more = f" (+{plural(len(lines) - 1, 'line')})" if len(lines) > 1 else ""
    return f.truncate(lines[0], ONE_LINE_CHARS) + more


def _message_diff(diff: TextDiff) -> list[RenderableType]:
    label = Text(f"{diff.role}:", style=ROLE_STYLES.get(diff.role or "", "bold"))
    if diff.change == "changed":
        return _changed_text(_marked("changed", label), diff.a or "", diff.b or "", 2)
    text = (diff.b if diff.change == "only_b" else diff.a) or ""
    style = _MARKS[diff.change][1]
    return [indented(_marked(diff.change, label, " ", plain(_one_line(text), style)), 2)]


def _call_diff(diff: ToolCallDiff) -> list[RenderableType]:
    call = diff.a if diff.a is not None else diff.b
    assert call is not None
    line = call_line(call, full=False)
    if diff.change == "same":
        line.stylize("dim")
    lines: list[RenderableType] = [indented(_marked(diff.change, line), 2)]
    if diff.change in ("only_a", "only_b"):
        result = "no result" if call.result is None else _one_line(call.result)
        lines.append(indented(Text.assemble(("← ", "dim"), plain(result, "dim")), 6))
    if diff.a is None or diff.b is None:
        return lines
    for name in diff.fields:
        label = Text(f"{name}:", style="bold")
        if name == "is_error":
            flip = f" {_yes(diff.a.is_error)} → {_yes(diff.b.is_error)}"
            lines.append(indented(Text.assemble(label, flip), 6))
            continue
        a, b = getattr(diff.a, name), getattr(diff.b, name)
        if name == "arguments":
            a, b = compact_json(a), compact_json(b)
        lines += _changed_text(label, a or "", b or "", 6)
    return lines


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _trial_side(label: str, side: TrialSide) -> list[RenderableType]:
    facts = [side.status.value, side.model or "no model", f.seconds(side.duration_s)]
    tokens = side.usage + side.grader_usage
    facts.append(f.NA + " tokens" if tokens.is_empty() else f"{tokens.total_tokens:,} tokens")
    facts.append(f.cost(side.cost_usd))
    line = Text.assemble(
        (f"{label}  ", "bold"),
        plain(run_label(side.run_id, side.run_name)),
        " · ",
        verdict_text(side.verdict),
        plain(" · " + " · ".join(facts)),
    )
    lines: list[RenderableType] = [indented(line, 2)]
    if side.error:
        lines.append(indented(plain(side.error, "yellow"), 5))
    return lines


def _count(items: Iterable[TextDiff | ToolCallDiff | ValueDiff | CheckDiff], what: str) -> str:
    n = sum(1 for item in items if item.change != "same")
    return "" if n == 0 else plural(n, what)


def render_diff(diff: TrialDiff, console: Console) -> None:
    """The two trials' headers and what differs, then each turn, the outcome and the scores;
    unchanged lines are dimmed (and cut to one line)."""
    console.print(Text.assemble(plain(f"{diff.task_id}#{diff.trial}", "bold"), " · A vs B"))
    console.print(*_trial_side("A", diff.a), *_trial_side("B", diff.b))
    a, b = diff.a, diff.b
    found = [
        f"{name} {x} → {y}"
        for name, x, y in (
            ("verdict", a.verdict.value, b.verdict.value),
            ("status", a.status.value, b.status.value),
        )
        if x != y
    ]
    if a.error != b.error:
        found.append("the error")
    found += [
        _count([m for t in diff.turns for m in t.messages], "message"),
        _count([c for t in diff.turns for c in t.tool_calls], "tool call"),
        _count(diff.outcome.items(), "outcome difference"),
        _count(diff.scores, "score"),
    ]
    found = [c for c in found if c]
    summary = Text("differences: " + "; ".join(found), style="bold")
    if not found:
        summary = Text("no differences in messages, tool calls, outcome or scores", style="dim")
    console.print(indented(summary, 2))
    for turn in diff.turns:
        where = {"only_a": " · only in A", "only_b": " · only in B"}.get(turn.change, "")
        console.print(section(f"turn {turn.index}{where}"))
        for message in turn.messages:
            console.print(*_message_diff(message))
        for call in turn.tool_calls:
            console.print(*_call_diff(call))
    console.print(*_outcome_diff(diff.outcome))
    console.print(section("scores"), _scores_table(diff.scores))


def _outcome_diff(diff: OutcomeDiff) -> list[RenderableType]:
    lines: list[RenderableType] = [section("outcome")]
    for name, text in (("output", diff.output), ("failure", diff.failure)):
        label = Text(f"{name}:", style="bold")
        if text.change == "changed" and text.a is not None and text.b is not None:
            lines += _changed_text(_marked("changed", label), text.a, text.b, 2)
        elif text.change == "changed":
            sides = f"{_present(text.a)} → {_present(text.b)}"
            lines.append(indented(_marked("changed", label, " ", sides), 2))
        elif text.a is not None:
            lines.append(indented(_marked("same", label, " ", plain(_one_line(text.a), "dim")), 2))
    if diff.failed.change == "changed":
        flip = f" {_yes(diff.failed.a)} → {_yes(diff.failed.b)}"
        lines.append(indented(_marked("changed", Text("failed:", style="bold"), flip), 2))
    for what, items in (("state", diff.state), ("file", diff.files), ("artifact", diff.artifacts)):
        for item in items:
            if item.change != "same":
                body = (Text(f"{what} ", style="bold"), plain(item.key), ": ", plain(_values(item)))
                lines.append(indented(_marked(item.change, *body), 2))
    if len(lines) == 1:
        lines.append(indented(Text("no output on either side", style="dim italic"), 2))
    return lines


def _present(text: str | None) -> str:
    return "none" if text is None else repr(_one_line(text))


def _describe(value: Any) -> str:
    if isinstance(value, FileChange):
        return " · ".join(file_facts(value))
    if isinstance(value, Artifact):
        return " · ".join(artifact_facts(value))
    return compact_json(value)


def _values(item: ValueDiff) -> str:
    if item.change == "only_a":
        return f"{_describe(item.a)} (only in A)"
    if item.change == "only_b":
        return f"{_describe(item.b)} (only in B)"
    a, b = _describe(item.a), _describe(item.b)
    return f"{a} → {b}" if a != b else f"{a} (contents differ)"


def _cell(side: CheckSide | None, rationale: bool) -> Text:
    if side is None:
        return Text("—", style="dim")
    cell = verdict_text(side.verdict)
    if side.value is not None:
        cell.append(f" {side.value:.2f}")
    if rationale and side.rationale:
        cell.append("\n")
        cell.append_text(plain(side.rationale, "dim"))
    return cell


def _check_rows(diffs: list[CheckDiff], depth: int) -> Iterator[tuple[Text, ...]]:
    for d in diffs:
        mark, style = _MARKS[d.change]
        name = plain("  " * depth + d.name, "" if d.change == "same" else "bold")
        rationale = "rationale" in d.fields
        yield Text(mark, style=style), name, _cell(d.a, rationale), _cell(d.b, rationale)
        yield from _check_rows(d.assertions, depth + 1)


def _scores_table(diffs: list[CheckDiff]) -> RenderableType:
    if not diffs:
        return indented(Text("no scores on either side", style="dim italic"), 2)
    table = Table(box=None, pad_edge=False, padding=(0, 1))
    table.add_column("", no_wrap=True)
    table.add_column("check", ratio=2)
    table.add_column("A", ratio=3)
    table.add_column("B", ratio=3)
    for row in _check_rows(diffs, 0):
        table.add_row(*row)
    return indented(table, 2)
