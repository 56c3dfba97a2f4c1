"""One trial's transcript for the terminal, and a listing of trials.

User content (messages, tool arguments and results, rationales, diffs) goes in as `Text`
objects, never as markup strings, so `[bold]` in model output prints literally; control
characters are shown escaped so an ANSI sequence cannot restyle or clear the terminal. Every
mark is a character as well as a colour, so the output reads the same without colour.
`reports/transcript_diff.py` compares two trials with the same pieces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text

from trialkit._record import ErrorInfo
from trialkit.outcome import Artifact, FileChange, Outcome
from trialkit.reports import _format as f
from trialkit.reports._table import Column, print_line, print_table
from trialkit.reports.terminal import STYLES, SYMBOLS
from trialkit.score import Assertion, Score, Verdict
from trialkit.store.queries import TrialLine, TrialListing
from trialkit.transcript import Message, ModelCall, Reasoning, ToolCall, Transcript, Turn, Usage
from trialkit.trial import Trial, TrialStatus

ARGUMENT_CHARS = 300
"""Tool arguments longer than this are cut unless `full`."""
RESULT_LINES = 8
"""Tool results with more lines than this are cut unless `full`."""
WORKSPACE_DIFF_LINES = 60
"""Workspace diffs with more lines than this are cut unless `full`."""
WHY_CHARS = 200
"""How much of a trial's error or failed check a listing shows."""

ROLE_STYLES = {"user": "bold cyan", "assistant": "bold green", "system": "bold", "tool": "magenta"}


def plain(text: str, style: str = "") -> Text:
    return Text(f.escape_controls(text), style=style)


def indented(renderable: RenderableType, indent: int) -> Padding:
    return Padding(renderable, (0, 0, 0, indent), expand=False)


def verdict_text(verdict: Verdict) -> Text:
    return Text(f"{SYMBOLS[verdict]} {f.WORDS[verdict]}", style=STYLES[verdict])


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _clip_lines(text: str, limit: int, full: bool) -> tuple[str, str | None]:
    """`text` cut to `limit` lines, and the note saying what was left out."""
    lines = text.splitlines()
    if full or len(lines) <= limit:
        return text, None
    return "\n".join(lines[:limit]), f"(+{plural(len(lines) - limit, 'line')}, --full to show)"


def labelled(label: Text, body: str, indent: int, style: str = "") -> list[RenderableType]:
    """`label body` on one line, or the label and then the body indented under it."""
    if "\n" not in body:
        return [indented(Text.assemble(label, " ", plain(body, style)), indent)]
    return [indented(label, indent), indented(plain(body, style), indent + 2)]


# -- messages grouped by turn ------------------------------------------------------------------


@dataclass
class TurnView:
    """The part of a transcript that belongs to one user turn."""

    index: int
    turn: Turn | None
    """`None` for a turn that did not finish (the agent raised or time ran out)."""
    inputs: list[Message] = field(default_factory=list)
    replies: list[Message] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[Reasoning] = field(default_factory=list)
    model_calls: list[ModelCall] = field(default_factory=list)

    def known_call_ids(self) -> set[str]:
        return {call.id for call in self.tool_calls}


def _inputs(turn: Turn) -> list[Message]:
    if isinstance(turn.input, str):
        return [Message(role="user", content=turn.input)]
    return list(turn.input)


def _find(messages: list[Message], wanted: list[Message], start: int) -> int | None:
    for i in range(start, len(messages) - len(wanted) + 1):
        if messages[i : i + len(wanted)] == wanted:
            return i
    return None


def _unfinished(index: int, messages: list[Message]) -> TurnView:
    cut = next((i for i, m in enumerate(messages) if m.role not in ("user", "system")), None)
    cut = len(messages) if cut is None else cut
    return TurnView(index, None, inputs=messages[:cut], replies=messages[cut:])


def _tail_start(replies: list[Message]) -> int | None:
    """Where a user message follows the agent's answer: a turn the runner did not record."""
    pairs = pairwise(replies)
    return next(
        (i + 1 for i, (a, b) in enumerate(pairs) if (a.role, b.role) == ("assistant", "user")), None
    )


def turns_of(transcript: Transcript) -> list[TurnView]:
    """The transcript cut into turns. The runner records each turn's input messages, then the
    agent's; a user message after the agent's last answer starts a turn that did not finish
    (the agent raised or time ran out before the runner recorded the turn)."""
    messages = transcript.messages
    views = [TurnView(turn.index, turn, inputs=_inputs(turn)) for turn in transcript.turns]
    placed: list[tuple[TurnView, int]] = []
    cursor = 0
    for view in views:
        start = _find(messages, view.inputs, cursor)
        if start is not None:
            placed.append((view, start))
            cursor = start + len(view.inputs)
    for k, (view, start) in enumerate(placed):
        end = placed[k + 1][1] if k + 1 < len(placed) else len(messages)
        view.replies = messages[start + len(view.inputs) : end]
    if placed:
        first, start = placed[0]
        first.inputs = messages[:start] + first.inputs
        last = placed[-1][0]
        tail = _tail_start(last.replies)
        if tail is not None:
            views.append(_unfinished(len(views), last.replies[tail:]))
            last.replies = last.replies[:tail]
    elif views:  # no input was found as recorded: show the messages as they are
        views[0].inputs, views[0].replies = [], messages
    elif messages:
        views.append(_unfinished(0, messages))
    agent_calls = [c for c in transcript.model_calls if c.role == "agent"]
    if not views and (transcript.tool_calls or transcript.reasoning or agent_calls):
        views.append(TurnView(0, None))
    for view in views:
        view.tool_calls = [c for c in transcript.tool_calls if _turn_of(c.turn, views) is view]
        view.reasoning = [r for r in transcript.reasoning if _turn_of(r.turn, views) is view]
        view.model_calls = [c for c in agent_calls if _turn_of(c.turn, views) is view]
    return views


def _turn_of(number: int, views: list[TurnView]) -> TurnView:
    """The view of turn `number`; events of turns that were not recorded go to the last one."""
    return views[min(max(number, 0), len(views) - 1)]


# -- one trial ---------------------------------------------------------------------------------


def render_trial(
    trial: Trial, console: Console, *, full: bool = False, run_name: str | None = None
) -> None:
    """The header, each turn, the outcome, the scores and the error of one trial."""
    console.print(*_header(trial, run_name))
    views = turns_of(trial.transcript)
    if not views:
        console.print(section("transcript"))
        console.print(indented(Text("nothing was recorded", style="dim italic"), 2))
    for view in views:
        console.print(*_turn(view, full))
    console.print(*_outcome(trial.outcome, full))
    console.print(*_scores(trial.scores, trial.transcript, full))
    if trial.error is not None:
        console.print(*_error(trial.error, full))


def run_label(run_id: str, run_name: str | None) -> str:
    return f"{run_id} ({run_name})" if run_name else run_id


def _header(trial: Trial, run_name: str | None) -> list[RenderableType]:
    title = Text.assemble(
        plain(trial.label, "bold"),
        " · run ",
        plain(run_label(trial.run_id, run_name)),
        " · ",
        verdict_text(trial.verdict),
    )
    if trial.status is not TrialStatus.COMPLETED:
        title.append(f" · status {trial.status.value}", style="yellow")
    seen = sorted({c.model for c in trial.transcript.model_calls if c.role == "agent"})
    if trial.model:
        facts = [f"model {trial.model}"]
    elif seen:  # the agent's own calls, through trialkit's models or captured
        facts = [f"the agent called {', '.join(seen)}"]
    else:
        facts = ["no model under test"]
    if trial.expect == "failure":
        facts.append("expects failure")
    facts.append(f"started {trial.started_at.isoformat(timespec='seconds')}")
    t = trial.transcript.timing
    phases = ", ".join(
        f"{name} {f.seconds(value)}"
        for name, value in (
            ("setup", t.setup_s),
            ("agent", t.agent_s),
            ("capture", t.capture_s),
            ("grading", t.grading_s),
        )
        if value
    )
    duration = f"duration {f.seconds(trial.duration_s)}" + (f" ({phases})" if phases else "")
    tokens = f"tokens {f.tokens(trial.usage, trial.grader_usage)}"
    cost = f"cost {f.total_cost(trial.cost_usd, trial.grader_cost_usd, trial.grader_usage)}"
    lines = [" · ".join(facts), duration, tokens, cost]
    if trial.sandbox is not None:
        lines.append(f"sandbox {trial.sandbox.summary()}")
    return [title, *(indented(plain(line), 2) for line in lines)]


def _turn(view: TurnView, full: bool) -> list[RenderableType]:
    title = f"turn {view.index}"
    if view.turn is None:
        title += " · did not finish"
    else:
        title += f" · {f.seconds(view.turn.duration_s)}"
    head = Text(title)
    if view.turn is not None and view.turn.is_error:
        head.append(" · the agent reported failure", style="red")
    lines: list[RenderableType] = [Rule(head, align="left", style="dim")]
    for message in view.inputs:
        lines += _message(message, 2)
    for thought in view.reasoning:
        lines += _reasoning(thought, full)
    lines += _replies(view, full)
    for call in view.model_calls:
        lines.append(indented(_model_call(call), 2))
    if view.turn is not None and (view.turn.reported_usage or view.turn.reported_cost_usd):
        lines.append(indented(_reported(view.turn), 2))
    if view.turn is not None and (view.turn.probes or view.turn.probe_errors):
        lines.append(indented(_probes(view.turn), 2))
    return lines


def _reported(turn: Turn) -> Text:
    """What the agent said its calls took, beside the captured calls above (not counted)."""
    parts = [_usage(turn.reported_usage)] if turn.reported_usage is not None else []
    if turn.reported_cost_usd is not None:
        parts.append(f.cost(turn.reported_cost_usd))
    said = " · ".join(parts)
    return Text(f"the agent reported {said} (not counted: the calls above are)", style="dim")


def _probes(turn: Turn) -> Text:
    text = Text("probes after this turn:", style="cyan")
    for name, value in turn.probes.items():
        text.append(f" {name}={compact_json(value)}")
    for name, error in turn.probe_errors.items():
        text.append(f" {name} raised {error}", style="red")
    return text


def _message(message: Message, indent: int) -> list[RenderableType]:
    name = f" {message.name}" if message.role == "tool" and message.name else ""
    label = Text(f"{message.role}{name}:", style=ROLE_STYLES[message.role])
    if not message.content:
        return [indented(Text.assemble(label, (" (empty)", "dim")), indent)]
    return labelled(label, message.content, indent)


def _reasoning(thought: Reasoning, full: bool) -> list[RenderableType]:
    label = Text("thinking:", style="dim bold")
    if thought.redacted and not thought.content:
        return [indented(Text.assemble(label, (" (redacted)", "dim")), 2)]
    if full:
        return labelled(label, thought.content, 2, "dim")
    first, *rest = thought.content.splitlines() or [""]
    line = Text.assemble(label, " ", plain(first, "dim"))
    if rest:
        line.append(f" (+{plural(len(rest), 'line')}, --full to show)", style="dim italic")
    return [indented(line, 2)]


def _replies(view: TurnView, full: bool) -> list[RenderableType]:
    """The agent's messages, each tool call under the message that made it (with its result),
    and calls no message names just before the turn's last answer."""
    known = {call.id: call for call in view.tool_calls}
    named = {c.id for m in view.replies for c in m.tool_calls if c.id in known}
    loose = [call for call in view.tool_calls if call.id not in named]
    answers = [i for i, m in enumerate(view.replies) if m.role == "assistant" and m.content]
    loose_at = answers[-1] if answers else len(view.replies)
    loose_lines = [line for call in loose for line in _tool_call(call, full)]
    lines: list[RenderableType] = []
    for i, message in enumerate(view.replies):
        if i == loose_at:
            lines += loose_lines
        if message.role == "tool" and message.tool_call_id in known:
            continue
        if message.content or not message.tool_calls:
            lines += _message(message, 2)
        for call in message.tool_calls:
            lines += _tool_call(known.get(call.id, call), full)
    if loose_at == len(view.replies):
        lines += loose_lines
    return lines


def call_line(call: ToolCall, full: bool) -> Text:
    arguments = compact_json(call.arguments)
    if not full:
        arguments = f.truncate(arguments, ARGUMENT_CHARS)
    line = Text.assemble(("→ ", "dim"), plain(call.name, "bold"), " ", plain(arguments))
    if call.duration_s is not None:
        line.append(f" · {f.seconds(call.duration_s)}", style="dim")
    return line


def _tool_call(call: ToolCall, full: bool) -> list[RenderableType]:
    lines: list[RenderableType] = [indented(call_line(call, full), 2)]
    if call.result is None:
        lines.append(indented(Text("← no result", style="yellow italic"), 4))
        return lines
    shown, note = _clip_lines(call.result, RESULT_LINES, full)
    label = Text("← ✗ error:", style="bold red") if call.is_error else Text("←", style="dim")
    lines += labelled(label, shown, 4, "red" if call.is_error else "")
    if note:
        lines.append(indented(Text(note, style="dim italic"), 6))
    return lines


def _usage(usage: Usage) -> str:
    return f"{usage.input_tokens:,} in / {usage.output_tokens:,} out"


def _model_call(call: ModelCall) -> Text:
    parts = [call.model, call.role, _usage(call.usage)]
    if call.endpoint is not None:  # made by the agent's own SDK client, captured
        status = f" → {call.status}" if call.status is not None else ""
        parts.insert(1, f"{call.endpoint}{status}")
    if call.latency_s is not None:
        parts.append(f.seconds(call.latency_s))
    if call.cost_usd is not None:
        parts.append(f.cost(call.cost_usd))
    if call.retries:
        parts.append(f"{call.retries} retr{'y' if call.retries == 1 else 'ies'}")
    if call.replayed:
        parts.append("replayed")
    line = Text.assemble(("model call ", "dim"), plain(" · ".join(parts), "dim"))
    if call.error:
        line.append(" · ✗ ", style="red")
        line.append(plain(call.error, "red"))
    return line


def section(title: str) -> Rule:
    return Rule(Text(title), align="left", style="dim")


def _outcome(outcome: Outcome, full: bool) -> list[RenderableType]:
    lines: list[RenderableType] = [section("outcome")]
    if outcome.output is None:
        lines.append(indented(Text("no output", style="dim italic"), 2))
    else:
        lines += labelled(Text("output:", style="bold"), outcome.output, 2)
    if outcome.failed:
        failure = outcome.failure or "(no message)"
        lines += labelled(Text("✗ the agent reported failure:", style="red"), failure, 2)
    if outcome.state:
        lines.append(indented(Text("state:", style="bold"), 2))
        for key, value in outcome.state.items():
            lines += labelled(plain(f"{key}:"), compact_json(value), 4)
    if outcome.diff is not None and outcome.diff.files:
        lines.append(indented(Text("workspace changes:", style="bold"), 2))
        for change in outcome.diff.files:
            lines += _file_change(change, full)
    if outcome.artifacts:
        lines.append(indented(Text("artifacts:", style="bold"), 2))
        for a in outcome.artifacts:
            lines.append(indented(plain(" · ".join([a.path, *artifact_facts(a)])), 4))
    return lines


def file_facts(change: FileChange) -> list[str]:
    """What happened to a file, without its path: `modified`, `binary`, its size."""
    facts: list[str] = [change.change]
    if change.binary:
        facts.append("binary")
    if change.size is not None:
        facts.append(f"{change.size:,} bytes")
    return facts


def artifact_facts(artifact: Artifact) -> list[str]:
    size = f"{artifact.size:,} bytes"
    return [size] if artifact.media_type is None else [size, artifact.media_type]


def _file_change(change: FileChange, full: bool) -> list[RenderableType]:
    name, *facts = file_facts(change)
    summary = " · ".join([f"{name} {change.path}", *facts])
    lines: list[RenderableType] = [indented(plain(summary), 4)]
    if change.diff:
        shown, note = _clip_lines(change.diff, WORKSPACE_DIFF_LINES, full)
        lines += [indented(diff_line(line), 6) for line in shown.splitlines()]
        if note:
            lines.append(indented(Text(note, style="dim italic"), 6))
    if change.truncated:
        lines.append(indented(Text("(diff cut at the size cap)", style="dim italic"), 6))
    return lines


def diff_line(line: str) -> Text:
    if line.startswith("@@"):
        return plain(line, "cyan")
    style = {"+": "green", "-": "red"}.get(line[:1], "")
    return plain(line, style)


def _score_line(name: str, verdict: Verdict, value: float | None) -> Text:
    line = Text.assemble(Text(SYMBOLS[verdict], style=STYLES[verdict]), " ", plain(name, "bold"))
    if value is not None:
        line.append(f" {value:.2f}")
    return line


def _check(check: Assertion | Score, indent: int, full: bool) -> list[RenderableType]:
    line = _score_line(check.name or "(unnamed)", check.verdict, check.value)
    reason = f.score_reason(check) if isinstance(check, Score) else check.rationale
    if isinstance(check, Score) and check.pending:
        line.append(" (waiting for a reviewer)", style="dim")
    if reason:
        line.append(":")
        lines = labelled(line, reason, indent)
    else:
        lines = [indented(line, indent)]
    error = check.error if isinstance(check, Score) else None
    if error is not None and error.traceback:
        lines += _traceback(error.traceback, indent + 2, full)
    for part in check.assertions:
        lines += _check(part, indent + 2, full)
    return lines


def _scores(scores: list[Score], transcript: Transcript, full: bool) -> list[RenderableType]:
    lines: list[RenderableType] = [section("scores")]
    if not scores:
        lines.append(indented(Text("no scores", style="dim italic"), 2))
    for score in scores:
        lines += _check(score, 2, full)
    for call in transcript.model_calls:
        if call.role == "grader":
            lines.append(indented(_model_call(call), 2))
    return lines


def _error(error: ErrorInfo, full: bool) -> list[RenderableType]:
    lines: list[RenderableType] = [section("error")]
    lines += labelled(Text(SYMBOLS[Verdict.ERROR], style="yellow"), f.error_text(error), 2)
    if error.traceback:
        lines += _traceback(error.traceback, 4, full)
    return lines


def _traceback(traceback: str, indent: int, full: bool) -> list[RenderableType]:
    if full:
        return [indented(plain(traceback.rstrip(), "dim"), indent)]
    note = f"traceback: {plural(len(traceback.splitlines()), 'line')}, --full to show"
    return [indented(Text(note, style="dim italic"), indent)]


# -- a listing of trials -----------------------------------------------------------------------


def render_trial_list(
    listing: TrialListing, console: Console, *, run_id: str, run_name: str | None = None
) -> None:
    """One row per trial, under a line naming the run and how many trials matched."""
    shown, total = len(listing.lines), listing.total
    count = plural(total, "trial")
    if shown < total:
        count = f"{shown} of {count} (--limit)"
    heading = Text.assemble(("run ", "bold"), plain(run_label(run_id, run_name)), f" · {count}")
    print_line(console, heading)
    columns = [
        Column("trial"),
        Column("verdict", drop=1),
        Column("status", drop=4),
        Column("duration", justify="right", drop=3),
        Column("tokens in/out", justify="right", drop=5),
        Column("cost", justify="right", drop=5),
        Column("why", fit="cut", drop=2),  # one line per trial, cut on a terminal
    ]
    rows = []
    for line in listing.lines:
        tokens = f"{line.input_tokens:,}/{line.output_tokens:,}"
        status = line.status.value
        rows.append(
            [
                plain(f"{line.task_id}#{line.index}"),
                verdict_text(line.verdict),
                Text(status, style="" if line.status is TrialStatus.COMPLETED else "yellow"),
                Text(f.seconds(line.duration_s)),
                Text(tokens if line.input_tokens or line.output_tokens else f.NA),
                Text(f.cost(line.cost_usd)),
                plain(" ⏎ ".join(why_not_passed(line).splitlines())[:WHY_CHARS]),
            ]
        )
    print_table(console, columns, rows)


def why_not_passed(line: TrialLine) -> str:
    """The trial's error, else its first check that did not pass, else a reported failure;
    nothing for a trial that passed."""
    if line.verdict is Verdict.PASS:
        return ""
    if line.error is not None:
        return f.error_text(line.error)
    if line.check is not None:
        return f"{line.check}: {line.rationale}" if line.rationale else line.check
    return "the agent reported failure" if line.failed else ""
