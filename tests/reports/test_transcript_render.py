"""Rendering one trial's transcript and the differences between two trials of a task."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime

from inline_snapshot import snapshot
from rich.console import Console

from trialkit._record import ErrorInfo
from trialkit.outcome import Artifact, FileChange, Outcome, WorkspaceDiff
from trialkit.reports.transcript import render_trial, turns_of
from trialkit.reports.transcript_diff import diff_trials, render_diff
from trialkit.score import Assertion, Score, Verdict
from trialkit.transcript import (
    Message,
    ModelCall,
    Reasoning,
    Timing,
    ToolCall,
    Transcript,
    Turn,
    Usage,
)
from trialkit.trial import Trial, TrialStatus

STARTED = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
AGENT_USAGE = Usage(input_tokens=1200, output_tokens=340)
JUDGE_USAGE = Usage(input_tokens=400, output_tokens=60)
NOTES_DIFF = """\
--- a/notes.md
+++ b/notes.md
@@ -1,3 +1,3 @@
 # Notes
-- buy milk
+- Buy milk
 - call Ann
"""


def agent_trial(
    run_id: str = "run-a",
    *,
    plan: str = "Let me read the file first.",
    path: str = "notes.md",
    tool_check: bool = True,
) -> Trial:
    """Two turns; tool calls with results, an error and a missing result; reasoning; an outcome
    with a workspace diff; a judge and a composite score."""
    read = ToolCall(
        id=f"{run_id}-1", name="read_file", arguments={"path": path}, result="# Notes\n- buy milk"
    )
    read.duration_s = 0.01
    edit = ToolCall(
        id=f"{run_id}-2",
        name="edit_file",
        arguments={"path": "notes.md", "old": "- buy", "new": "- Buy"},
        result="PermissionError: notes.md is read-only",
        is_error=True,
    )
    write = ToolCall(
        id=f"{run_id}-3", name="write_file", arguments={"path": "notes.md", "content": "…"}
    )
    ask = "Tidy notes.md: capitalise each item."
    answer = "Done: notes.md now has capitalised items."
    messages = [
        Message(role="system", content="You are a careful note keeper."),
        Message(role="user", content=ask),
        Message(role="assistant", content=plan, tool_calls=[read]),
        Message(role="tool", name="read_file", tool_call_id=read.id, content=read.result or ""),
        Message(role="assistant", tool_calls=[edit]),
        Message(role="tool", name="edit_file", tool_call_id=edit.id, content=edit.result or ""),
        Message(role="assistant", tool_calls=[write]),
        Message(role="assistant", content=answer),
        Message(role="user", content="Anything else?"),
        Message(role="assistant", content="No, that was all."),
    ]
    agent_call = ModelCall(
        model="openai/gpt-4o-mini", usage=AGENT_USAGE, cost_usd=0.0012, latency_s=1.25, retries=1
    )
    second = ModelCall(
        model="openai/gpt-4o-mini", usage=Usage(input_tokens=80, output_tokens=6), turn=1
    )
    second.replayed = True
    judge = ModelCall(
        model="openai/gpt-4o", role="grader", usage=JUDGE_USAGE, cost_usd=0.0009, latency_s=0.5
    )
    transcript = Transcript(
        messages=messages,
        tool_calls=[read, edit, write],
        reasoning=[
            Reasoning(content="The user wants capitals.\nRead first, then edit.\nThen check.")
        ],
        turns=[
            Turn(index=0, input=[messages[0], messages[1]], output=answer, duration_s=2.5),
            Turn(index=1, input="Anything else?", output="No, that was all.", duration_s=0.4),
        ],
        model_calls=[agent_call, second, judge],
        usage=AGENT_USAGE,
        grader_usage=JUDGE_USAGE,
        timing=Timing(started_at=STARTED, setup_s=0.1, agent_s=2.9, grading_s=0.6, total_s=3.6),
    )
    outcome = Outcome(
        output="No, that was all.",
        state={"items": 2, "tidy": True},
        artifacts=[Artifact(path="report.txt", content="ok", size=2, media_type="text/plain")],
        diff=WorkspaceDiff(
            files=[FileChange(path="notes.md", change="modified", diff=NOTES_DIFF, size=28)]
        ),
    )
    scores = [
        Score(
            name="judge",
            value=0.9,
            verdict=Verdict.PASS,
            rationale="Both items are capitalised; nothing else changed.",
        ),
        Score.from_bool(tool_check, name="tool_called('read_file')"),
        Score(
            name="all_of",
            value=1.0,
            verdict=Verdict.PASS,
            assertions=[
                Assertion(name="file_changed('notes.md')", verdict=Verdict.PASS),
                Assertion(name="no_errors", verdict=Verdict.PASS, rationale="none raised"),
            ],
        ),
    ]
    return Trial(
        run_id=run_id,
        task_id="notes",
        index=0,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS if tool_check else Verdict.FAIL,
        model="openai/gpt-4o-mini",
        transcript=transcript,
        outcome=outcome,
        scores=scores,
        usage=AGENT_USAGE + Usage(input_tokens=80, output_tokens=6),
        grader_usage=JUDGE_USAGE,
        cost_usd=0.0021,
        grader_cost_usd=0.0009,
        started_at=STARTED,
        duration_s=3.6,
    )


TRACEBACK = """\
Traceback (most recent call last):
  File "agent.py", line 12, in run
    return tidy(path)
  File "agent.py", line 30, in tidy
    raise RuntimeError("disk full")
RuntimeError: disk full
"""


def errored_trial(run_id: str = "run-a", index: int = 1) -> Trial:
    """The agent raised during its first turn: a user message, no reply, an error."""
    return Trial(
        run_id=run_id,
        task_id="notes",
        index=index,
        status=TrialStatus.ERROR,
        verdict=Verdict.ERROR,
        transcript=Transcript(messages=[Message(role="user", content="Tidy notes.md")]),
        error=ErrorInfo(
            type="RuntimeError", message="disk full", traceback=TRACEBACK, phase="agent"
        ),
        started_at=STARTED,
        duration_s=0.5,
    )


def render(draw: Callable[..., None], *args: object, **kwargs: object) -> str:
    """What `draw(*args, console, **kwargs)` prints on a 100-column console without colours."""
    out = io.StringIO()
    draw(*args, Console(file=out, width=100, color_system=None, force_terminal=False), **kwargs)
    text = out.getvalue()
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def different_trial() -> Trial:
    """`agent_trial` with one message, one tool call argument and one check's verdict changed."""
    return agent_trial(
        "run-b", plan="Let me open the file first.", path="./notes.md", tool_check=False
    )


def test_show_a_trial() -> None:
    assert render(render_trial, agent_trial(), run_name="nightly") == snapshot("""\
notes#0 · run run-a (nightly) · ✓ pass
  model openai/gpt-4o-mini · started 2026-11-29T12:00:00+00:00
  duration 3.60 s (setup 0.10 s, agent 2.90 s, grading 0.60 s)
  tokens 2,086 (agent 1,280 in / 346 out; graders 400 in / 60 out)
  cost $0.0021 (graders $0.0009)
turn 0 · 2.50 s ────────────────────────────────────────────────────────────────────────────────────
  system: You are a careful note keeper.
  user: Tidy notes.md: capitalise each item.
  thinking: The user wants capitals. (+2 lines, --full to show)
  assistant: Let me read the file first.
  → read_file {"path": "notes.md"} · 0.01 s
    ←
      # Notes
      - buy milk
  → edit_file {"path": "notes.md", "old": "- buy", "new": "- Buy"}
    ← ✗ error: PermissionError: notes.md is read-only
  → write_file {"path": "notes.md", "content": "…"}
    ← no result
  assistant: Done: notes.md now has capitalised items.
  model call openai/gpt-4o-mini · agent · 1,200 in / 340 out · 1.25 s · $0.0012 · 1 retry
turn 1 · 0.40 s ────────────────────────────────────────────────────────────────────────────────────
  user: Anything else?
  assistant: No, that was all.
  model call openai/gpt-4o-mini · agent · 80 in / 6 out · replayed
outcome ────────────────────────────────────────────────────────────────────────────────────────────
  output: No, that was all.
  state:
    items: 2
    tidy: true
  workspace changes:
    modified notes.md · 28 bytes
      --- a/notes.md
      +++ b/notes.md
      @@ -1,3 +1,3 @@
       # Notes
      -- buy milk
      +- Buy milk
       - call Ann
  artifacts:
    report.txt · 2 bytes · text/plain
scores ─────────────────────────────────────────────────────────────────────────────────────────────
  ✓ judge 0.90: Both items are capitalised; nothing else changed.
  ✓ tool_called('read_file') 1.00
  ✓ all_of 1.00
    ✓ file_changed('notes.md')
    ✓ no_errors: none raised
  model call openai/gpt-4o · grader · 400 in / 60 out · 0.50 s · $0.0009
""")


def test_show_an_errored_trial() -> None:
    assert render(render_trial, errored_trial()) == snapshot("""\
notes#1 · run run-a · ! error · status error
  no model under test · started 2026-11-29T12:00:00+00:00
  duration 0.50 s
  tokens n/a
  cost n/a
turn 0 · did not finish ────────────────────────────────────────────────────────────────────────────
  user: Tidy notes.md
outcome ────────────────────────────────────────────────────────────────────────────────────────────
  no output
scores ─────────────────────────────────────────────────────────────────────────────────────────────
  no scores
error ──────────────────────────────────────────────────────────────────────────────────────────────
  ! RuntimeError: disk full (during agent)
    traceback: 6 lines, --full to show
""")


def test_full_shows_reasoning_and_the_traceback() -> None:
    text = render(render_trial, errored_trial(), full=True)
    assert 'File "agent.py", line 30, in tidy' in text
    assert "--full" not in text

    text = render(render_trial, agent_trial(), full=True)
    assert "Read first, then edit.\n" in text
    assert "--full" not in text


def test_long_tool_results_collapse_unless_full() -> None:
    trial = agent_trial()
    trial.transcript.tool_calls[0].result = "\n".join(f"line {i}" for i in range(20))

    collapsed = render(render_trial, trial)
    assert "line 7\n" in collapsed
    assert "line 8\n" not in collapsed
    assert "(+12 lines, --full to show)" in collapsed
    assert "line 19\n" in render(render_trial, trial, full=True)


def test_user_content_is_shown_literally_and_escaped() -> None:
    trial = agent_trial()
    nasty = "[bold]x[/bold] :warning: \x1b[31mred\x1b[0m"
    trial.transcript.messages[-1].content = nasty
    trial.outcome.output = nasty
    trial.scores[0].rationale = nasty

    plain = render(render_trial, trial)
    assert plain.count("[bold]x[/bold] :warning: \\x1b[31mred\\x1b[0m") == 3

    out = io.StringIO()
    render_trial(trial, Console(file=out, width=100, force_terminal=True, color_system="standard"))
    coloured = out.getvalue()
    assert "\x1b[31mred" not in coloured
    assert "[bold]x[/bold]" in coloured


def test_turns_split_a_transcript_by_turn_and_keep_an_unfinished_turn() -> None:
    transcript = agent_trial().transcript
    transcript.messages.append(Message(role="user", content="One more thing"))
    transcript.tool_calls.append(
        ToolCall(id="late", name="read_file", arguments={"path": "x"}, turn=2)
    )

    views = turns_of(transcript)

    assert [(v.index, v.turn is None) for v in views] == [(0, False), (1, False), (2, True)]
    assert [m.role for m in views[0].inputs] == ["system", "user"]
    assert [m.role for m in views[0].replies][-1] == "assistant"
    assert [c.name for c in views[0].tool_calls] == ["read_file", "edit_file", "write_file"]
    assert [m.content for m in views[1].replies] == ["No, that was all."]
    assert [m.content for m in views[2].inputs] == ["One more thing"]
    assert [c.id for c in views[2].tool_calls] == ["late"]


def test_diff_two_trials() -> None:
    diff = diff_trials(agent_trial(), different_trial(), run_names=("nightly", None))
    assert render(render_diff, diff) == snapshot("""\
notes#0 · A vs B
  A  run-a (nightly) · ✓ pass · completed · openai/gpt-4o-mini · 3.60 s · 2,086 tokens · $0.0021
  B  run-b · ✗ fail · completed · openai/gpt-4o-mini · 3.60 s · 2,086 tokens · $0.0021
  differences: verdict pass → fail; 1 message; 1 tool call; 1 score
turn 0 ─────────────────────────────────────────────────────────────────────────────────────────────
    system: You are a careful note keeper.
    user: Tidy notes.md: capitalise each item.
  ~ assistant: Let me [-read-]{+open+} the file first.
    assistant: Done: notes.md now has capitalised items.
  ~ → read_file {"path": "notes.md"} · 0.01 s
      arguments: {"path": [-"notes.md"}-]{+"./notes.md"}+}
    → edit_file {"path": "notes.md", "old": "- buy", "new": "- Buy"}
    → write_file {"path": "notes.md", "content": "…"}
turn 1 ─────────────────────────────────────────────────────────────────────────────────────────────
    user: Anything else?
    assistant: No, that was all.
outcome ────────────────────────────────────────────────────────────────────────────────────────────
    output: No, that was all.
scores ─────────────────────────────────────────────────────────────────────────────────────────────
     check                       A            B
     judge                       ✓ pass 0.90  ✓ pass 0.90
  ~  tool_called('read_file')    ✓ pass 1.00  ✗ fail 0.00
     all_of                      ✓ pass 1.00  ✓ pass 1.00
       file_changed('notes.md')  ✓ pass       ✓ pass
       no_errors                 ✓ pass       ✓ pass
""")


def test_diff_marks_exactly_what_differs() -> None:
    diff = diff_trials(agent_trial(), different_trial())

    changed_messages = [m for t in diff.turns for m in t.messages if m.change != "same"]
    assert [(m.change, m.role, m.a, m.b) for m in changed_messages] == [
        ("changed", "assistant", "Let me read the file first.", "Let me open the file first.")
    ]
    changed_calls = [c for t in diff.turns for c in t.tool_calls if c.change != "same"]
    assert [(c.position, c.fields) for c in changed_calls] == [(0, ["arguments"])]
    assert [(s.name, s.fields) for s in diff.scores if s.change != "same"] == [
        ("tool_called('read_file')", ["verdict", "value"])
    ]
    assert {item.change for item in diff.outcome.items()} == {"same"}
    assert (diff.a.verdict, diff.b.verdict) == (Verdict.PASS, Verdict.FAIL)
    assert not diff.same


def test_a_trial_does_not_differ_from_itself() -> None:
    diff = diff_trials(agent_trial(), agent_trial("run-b"))

    assert diff.same
    assert "no differences in messages, tool calls, outcome or scores" in render(render_diff, diff)


def test_diff_of_trials_with_different_shapes() -> None:
    b = agent_trial("run-b")
    b.transcript.tool_calls.append(ToolCall(id="x", name="list_dir", result="notes.md"))
    b.outcome.state["items"] = 3
    b.outcome.state["extra"] = None
    b.scores.append(Score.from_bool(True, name="new_check"))

    diff = diff_trials(errored_trial(), b)
    text = render(render_diff, diff)

    assert [t.change for t in diff.turns] == ["changed", "only_b"]
    assert [c.change for c in diff.turns[0].tool_calls] == ["only_b"] * 4
    assert "+ → list_dir {}" in text
    assert "turn 1 · only in B" in text
    assert "+ state items: 3 (only in B)" in text
    assert "+ state extra: null (only in B)" in text
    assert "+ file notes.md: modified · 28 bytes (only in B)" in text
    assert [(s.name, s.change) for s in diff.scores][-1] == ("new_check", "only_b")
    assert "~ user: Tidy [-notes.md-]{+notes.md: capitalise each item.+}" in text
    assert "+ system: You are a careful note keeper." in text


def test_word_and_line_diffs() -> None:
    a = agent_trial()
    b = agent_trial("run-b")
    b.outcome.output = "No, that was all.\nBye."
    a.outcome.state["items"] = 1

    text = render(render_diff, diff_trials(a, b))

    assert "~ output:\n     No, that was all.\n    +Bye.\n" in text
    assert "~ state items: 1 → 2" in text


def test_tool_calls_no_message_names_come_before_the_answer() -> None:
    trial = errored_trial()
    call = ToolCall(id="c1", name="lookup", arguments={"q": "x"}, result="Paris")
    trial.transcript = Transcript(
        messages=[
            Message(role="user", content="Capital?"),
            Message(role="assistant", content="Paris"),
        ],
        tool_calls=[call],
        turns=[Turn(index=0, input="Capital?", output="Paris")],
    )

    lines = [line.strip() for line in render(render_trial, trial).splitlines()]

    start = lines.index("user: Capital?")
    assert lines[start : start + 4] == [
        "user: Capital?",
        '→ lookup {"q": "x"}',
        "← Paris",
        "assistant: Paris",
    ]


def test_messages_are_shown_when_no_turn_input_is_found_in_them() -> None:
    trial = errored_trial()
    trial.transcript = Transcript(
        messages=[
            Message(role="user", content="rewritten"),
            Message(role="assistant", content="ok"),
        ],
        turns=[Turn(index=0, input="original", output="ok")],
    )

    text = render(render_trial, trial)

    assert "user: rewritten\n  assistant: ok\n" in text
    assert "original" not in text


def test_a_grader_error_shows_its_traceback_with_full() -> None:
    trial = agent_trial()
    error = ErrorInfo(type="ValueError", message="unparseable", traceback=TRACEBACK)
    trial.scores.append(Score.from_error(error, name="judge2"))

    assert "! judge2: ValueError: unparseable\n    traceback: 6 lines" in render(
        render_trial, trial
    )
    assert 'raise RuntimeError("disk full")' in render(render_trial, trial, full=True)


def test_probe_answers_show_under_their_turn() -> None:
    trial = agent_trial()
    first, second = trial.transcript.turns
    first.probes = {"tidy": False, "items": 2}
    second.probes = {"tidy": True}
    second.probe_errors = {"items": "OSError: gone"}
    shown = render(render_trial, trial)
    turn_1 = shown.index("turn 1 ·")
    assert shown.index("probes after this turn: tidy=false items=2") < turn_1
    assert shown.index("probes after this turn: tidy=true items raised OSError: gone") > turn_1


def test_what_the_agent_reported_is_shown_beside_the_captured_calls() -> None:
    trial = errored_trial()
    captured = ModelCall(
        model="anthropic/claude-sonnet-4-5",
        endpoint="POST https://api.anthropic.com/v1/messages",
        status=200,
        usage=Usage(input_tokens=8555, output_tokens=2),
        cost_usd=0.0257,
    )
    reported = Usage(input_tokens=8555, output_tokens=7)
    trial.transcript = Transcript(
        messages=[Message(role="user", content="Hi"), Message(role="assistant", content="Hello")],
        model_calls=[captured],
        turns=[
            Turn(
                index=0,
                input="Hi",
                output="Hello",
                reported_usage=reported,
                reported_cost_usd=0.0518,
            )
        ],
    )

    lines = [line.strip() for line in render(render_trial, trial).splitlines()]

    call = next(i for i, line in enumerate(lines) if line.startswith("model call"))
    said = "the agent reported 8,555 in / 7 out · $0.0518 (not counted: the calls above are)"
    assert said in lines and lines.index(said) > call
