"""`trialkit review RUN`: label, one by one, the trials that wait for a human reviewer.

The screen is made of the transcript view's pieces (`reports/transcript.py`), imported when a
review starts: they import the store, which `trialkit --help` should not pay for.
"""

from __future__ import annotations

import getpass
import os
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import click
from rich.console import Console, RenderableType
from rich.text import Text

from trialkit.cli._common import (
    EXIT_INTERRUPTED,
    debug_option,
    handle_errors,
    open_store,
    stdout_console,
    store_option,
)
from trialkit.reports import _format as f

if TYPE_CHECKING:
    from trialkit.score import Score
    from trialkit.store import Store
    from trialkit.trial import Trial

REVIEWER_ENV_VAR = "TRIALKIT_REVIEWER"
OUTPUT_CHARS = 3000
"""How much of the agent's output the review shows."""
TOOL_CALLS_SHOWN = 10
DIFF_LINES = 40
"""Lines of each file's unified diff the review shows."""

Answer = Literal["pass", "fail", "unknown"]
_ANSWERS: dict[str, Answer | None] = {
    "p": "pass",
    "f": "fail",
    "u": "unknown",
    "s": None,
}
_PROMPT = "[p]ass / [f]ail / [u]nknown / [s]kip / [q]uit"


def _score(text: str) -> float | None:
    """A number in [0, 1], or `None` for an empty answer; click asks again on a bad one."""
    if not text.strip():
        return None
    try:
        number = float(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a number; give one from 0 to 1, or press Enter"
        ) from None
    if not 0.0 <= number <= 1.0:
        raise click.BadParameter(f"{number:g} is not within [0, 1]")
    return number


@click.command("review")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--reviewer",
    metavar="NAME",
    help=f"Who is labelling [env {REVIEWER_ENV_VAR}; default: your user name].",
)
@click.option(
    "--grader",
    metavar="NAME",
    help="Only the pending scores of this grader [default: every grader waiting for a reviewer].",
)
@store_option
@debug_option
@handle_errors
def review_command(
    run_ref: str, reviewer: str | None, grader: str | None, store_url: str | None, debug: bool
) -> None:
    """Label the trials of RUN that wait for a human reviewer, one at a time.

    Each shows the task's input and criteria, a summary of the transcript, the output, the
    workspace changes and the reviewer's instructions; answer pass, fail or unknown, with an
    optional score (0 to 1) and comment. Each answer is saved at once, so quitting (q, or
    Ctrl-C) keeps every answer given; run the command again to go on where you stopped.
    """
    from trialkit.labels import Label

    who = reviewer or default_reviewer()
    console = stdout_console()
    saved: Counter[str] = Counter()
    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref)
        pending = store.pending_reviews(run_id, grader=grader)
        if not pending:
            which = "" if grader is None else f" for grader {grader!r}"
            click.echo(f"nothing to review{which} in run {run_id}")
            return
        click.echo(
            f"{plural(len(pending), 'review')} to do in run {run_id}, as {who or 'anonymous'}"
        )
        try:
            for number, item in enumerate(pending, start=1):
                trial = store.load_trial(run_id, item.task_id, item.trial)
                score = _pending_score(trial, item.grader)
                if score is None:  # another reviewer labelled it since the list was made
                    continue
                render_review(console, trial, score, position=(number, len(pending)))
                choice = click.prompt(
                    _PROMPT,
                    type=click.Choice([*_ANSWERS, "q"], case_sensitive=False),
                    show_choices=False,
                ).lower()
                if choice == "q":
                    break
                verdict = _ANSWERS[choice]
                if verdict is None:
                    saved["skipped"] += 1
                    continue
                value = click.prompt(
                    "score 0-1 (Enter: none)",
                    default="",
                    show_default=False,
                    value_proc=_score,
                )
                comment = click.prompt("comment (Enter: none)", default="", show_default=False)
                label = Label(
                    run_id=run_id,
                    task_id=item.task_id,
                    trial=item.trial,
                    grader=item.grader,
                    verdict=verdict,
                    score=value,
                    reviewer=who,
                    labeled_at=datetime.now(UTC),
                    comment=comment.strip() or None,
                )
                store.save_label(label)
                saved[verdict] += 1
                click.echo(f"saved: {trial.label} {verdict}")
        except click.Abort:
            click.echo("")
            _summarize(store, run_id, saved)
            click.echo("interrupted: every answer given so far is saved", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None
        _summarize(store, run_id, saved)


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def default_reviewer() -> str | None:
    """`$TRIALKIT_REVIEWER`, else the user name of this session (`None` when there is none)."""
    chosen = os.environ.get(REVIEWER_ENV_VAR, "").strip()
    if chosen:
        return chosen
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return None


def _pending_score(trial: Trial, grader: str) -> Score | None:
    return next((s for s in trial.scores if s.name == grader and s.pending), None)


def _summarize(store: Store, run_id: str, saved: Counter[str]) -> None:
    answered = ", ".join(f"{saved[v]} {v}" for v in ("pass", "fail", "unknown") if saved[v])
    skipped = f", {saved['skipped']} skipped" if saved["skipped"] else ""
    left = len(store.pending_reviews(run_id))
    click.echo(
        f"labelled {plural(sum(saved[v] for v in ('pass', 'fail', 'unknown')), 'trial')}"
        f"{f' ({answered})' if answered else ''}{skipped}; "
        f"{plural(left, 'review')} still pending in run {run_id}"
    )


# -- one review screen --------------------------------------------------------------------------


def render_review(
    console: Console, trial: Trial, score: Score, *, position: tuple[int, int]
) -> None:
    """What a reviewer needs to judge one trial, with the grader's instructions last."""
    from trialkit.reports.transcript import indented, plain, section, verdict_text

    number, total = position
    title = Text.assemble(
        (f"[{number}/{total}] ", "dim"),
        plain(trial.label, "bold"),
        " · grader ",
        plain(score.name, "bold"),
        " · now ",
        verdict_text(trial.verdict),
    )
    console.print(
        section(""),
        title,
        *_task(trial, score),
        *_summary(trial),
        *_outcome(trial),
        *_checks(trial, score),
        section("instructions"),
    )
    instructions = score.metadata.get("instructions")
    if isinstance(instructions, str) and instructions.strip():
        console.print(indented(plain(instructions), 2))
    else:
        console.print(indented(Text("judge whether the trial did what the task asks", "dim"), 2))


def _task(trial: Trial, score: Score) -> list[RenderableType]:
    from trialkit.reports.transcript import indented, labelled, section

    lines: list[RenderableType] = [section("task")]
    lines += labelled(Text("input:", style="bold"), _input(trial), 2)
    for key in ("criteria", "reference"):
        value = score.metadata.get(key)
        if isinstance(value, str) and value.strip():
            lines += labelled(Text(f"{key}:", style="bold"), value, 2)
    if trial.expect == "failure":
        lines.append(indented(Text("expects failure: the agent should refuse or fail"), 2))
    return lines


def _input(trial: Trial) -> str:
    """The user's side of the first turn (as the transcript recorded it)."""
    turns = trial.transcript.turns
    if turns:
        first = turns[0].input
        text = first if isinstance(first, str) else "\n".join(m.content for m in first)
    else:
        users = [m.content for m in trial.transcript.messages if m.role == "user"]
        text = users[0] if users else "(not recorded)"
    more = len(turns) - 1
    return text if more <= 0 else f"{text}\n(+{plural(more, 'more turn')})"


def _summary(trial: Trial) -> list[RenderableType]:
    from trialkit.reports.transcript import call_line, indented, plain, section

    t = trial.transcript
    calls = t.tool_calls
    counts = Counter(call.name for call in calls)
    named = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in counts.most_common())
    facts = [
        plural(len(t.turns), "turn"),
        plural(len(calls), "tool call") + (f" ({named})" if named else ""),
        f"duration {f.seconds(trial.duration_s)}",
    ]
    lines: list[RenderableType] = [section("transcript"), indented(plain(" · ".join(facts)), 2)]
    lines += [indented(call_line(call, full=False), 2) for call in calls[:TOOL_CALLS_SHOWN]]
    if len(calls) > TOOL_CALLS_SHOWN:
        more = plural(len(calls) - TOOL_CALLS_SHOWN, "more call")
        hint = f"trialkit transcripts show {trial.run_id}/{trial.label}"
        lines.append(indented(plain(f"… {more} ({hint})", "dim"), 2))
    return lines


def _outcome(trial: Trial) -> list[RenderableType]:
    from trialkit.reports.transcript import (
        diff_line,
        file_facts,
        indented,
        labelled,
        plain,
        section,
    )

    outcome = trial.outcome
    lines: list[RenderableType] = [section("outcome")]
    if outcome.output is None:
        lines.append(indented(Text("no output", style="dim italic"), 2))
    else:
        lines += labelled(
            Text("output:", style="bold"), f.truncate(outcome.output, OUTPUT_CHARS), 2
        )
    if outcome.failed:
        failure = outcome.failure or "(no message)"
        lines += labelled(Text("✗ the agent reported failure:", style="red"), failure, 2)
    files = outcome.diff.files if outcome.diff is not None else []
    if files:
        lines.append(indented(Text(f"{plural(len(files), 'file')} changed:", style="bold"), 2))
    for change in files:
        lines.append(indented(plain(" · ".join([change.path, *file_facts(change)])), 4))
        diff = (change.diff or "").splitlines()
        lines += [indented(diff_line(line), 6) for line in diff[:DIFF_LINES]]
        if len(diff) > DIFF_LINES:
            more = plural(len(diff) - DIFF_LINES, "more line")
            lines.append(indented(Text(f"… {more} (transcripts show --full)", "dim"), 6))
    if trial.error is not None:
        lines += labelled(Text("error:", style="yellow"), f.error_text(trial.error), 2)
    return lines


def _checks(trial: Trial, pending: Score) -> list[RenderableType]:
    from trialkit.reports.transcript import indented, plain, section, verdict_text

    others = [s for s in trial.scores if s is not pending]
    if not others:
        return []
    lines: list[RenderableType] = [section("other checks")]
    for score in others:
        line = Text.assemble(verdict_text(score.verdict), " ", plain(score.name or "(unnamed)"))
        reason = f.score_reason(score)
        if reason:
            line.append(": ")
            line.append(plain(f.truncate(reason, 200)))
        lines.append(indented(line, 2))
    return lines
