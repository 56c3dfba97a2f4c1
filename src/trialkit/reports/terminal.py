"""The terminal report: the Markdown report's figures, as rich tables.

User content goes in as `Text` objects, never as markup strings, so model output such as
`[bold]` or `:warning:` prints literally; control characters are shown escaped so an ANSI
sequence in an output cannot restyle or clear the terminal.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from trialkit.report import Report, TaskReport, TrialResult
from trialkit.reports import _format as f
from trialkit.score import Assertion, Verdict

OUTPUT_EXCERPT_CHARS = 400

STYLES = {
    Verdict.PASS: "green",
    Verdict.FAIL: "red",
    Verdict.ERROR: "yellow",
    Verdict.UNKNOWN: "magenta",
}

SYMBOLS = {
    Verdict.PASS: "✓",
    Verdict.FAIL: "✗",
    Verdict.ERROR: "!",
    Verdict.UNKNOWN: "?",
}


MAX_DETAILED_TASKS = 10


def render_terminal(report: Report, console: Console, *, details: bool = True) -> None:
    """Details first, summary last, so the figures stay on screen after a long run.

    Details cover tasks that did not pass, then tasks with some non-passing trials, at most
    `MAX_DETAILED_TASKS` of them; the rest are named in one line.
    """
    if details:
        worst_first = sorted(report.failing_tasks, key=lambda t: t.verdict is Verdict.PASS)
        for task in worst_first[:MAX_DETAILED_TASKS]:
            console.print(_task_details(task))
        rest = worst_first[MAX_DETAILED_TASKS:]
        if rest:
            names = ", ".join(f.escape_controls(t.id) for t in rest)
            console.print(
                _plain(
                    f"… and {len(rest)} more tasks with non-passing trials: {names} "
                    f"(see `trialkit report {report.run.id} --format md`)",
                    style="dim",
                )
            )
    console.print(_task_table(report))
    console.print(_summary_table(report))
    s = report.summary
    if s.pending:
        line = f"Pending review: {s.pending} of {s.trials} trials (trialkit review {report.run.id})"
        console.print(_plain(line, style="bold magenta"))
    ending = f.run_ending(report)
    if ending:
        console.print(_plain(ending[0].upper() + ending[1:], style="bold yellow"))
    note = f.pass_k_note(report)
    if note:
        console.print(_plain(note, style="dim"))


def _plain(text: str, style: str = "") -> Text:
    return Text(f.escape_controls(text), style=style)


def _verdict(verdict: Verdict) -> Text:
    return Text(f"{SYMBOLS[verdict]} {f.WORDS[verdict]}", style=STYLES[verdict])


def _counts(total: int, counts: f.Counts) -> Text:
    text = Text(f"{total}: ")
    for i, (verdict, n) in enumerate(counts.items()):
        if i:
            text.append(", ")
        text.append(f"{n} {f.COUNT_WORDS[verdict]}", style=STYLES[verdict] if n else "")
    return text


def _summary_table(report: Report) -> Table:
    table = Table(
        title=_plain(f"trialkit · {f.run_title(report)}", style="bold"),
        caption=_plain(f.run_started(report)),
        show_header=False,
        box=box.SIMPLE,
    )
    table.add_column("metric", style="bold")
    table.add_column("value")
    s = report.summary
    table.add_row("Tasks", _counts(s.tasks, f.task_counts(s)))
    table.add_row("Trials", _counts(s.trials, f.trial_counts(s)))
    for label, value in f.summary_rows(report):
        table.add_row(Text(label), Text(value))
    return table


def _task_table(report: Report) -> Table:
    k = f.max_k(report)
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("Task", overflow="fold", min_width=16)
    table.add_column("Kind", no_wrap=True)
    table.add_column("Verdict", no_wrap=True)
    table.add_column("Passed", justify="right", no_wrap=True)
    if k is not None:
        table.add_column(f"pass@{k}", justify="right")
        table.add_column(f"pass^{k}", justify="right")
    table.add_column("Notes")
    for task in report.tasks:
        row = [_plain(task.id), Text(task.kind.value), _verdict(task.verdict)]
        row.append(Text(f.trials_passed(task)))
        if k is not None:
            row.append(Text(f.percent(task.pass_at_k.get(k))))
            row.append(Text(f.percent(task.pass_hat_k.get(k))))
        notes = Text()
        if task.flaky:
            notes.append("flaky", style="yellow")
        if task.expect == "failure":
            notes.append((", " if notes else "") + "expects failure")
        if task.pending:
            notes.append((", " if notes else "") + f"{task.pending} pending review")
        row.append(notes)
        table.add_row(*row)
    return table


def _task_details(task: TaskReport) -> Group:
    title = Text.assemble(
        _verdict(task.verdict),
        " ",
        _plain(task.id, style="bold"),
        f" — {f.trials_passed(task)} trials passed",
    )
    parts: list[Text | Padding] = [Text(""), title]
    for group in f.group_trials(f.non_passing_trials(task)):
        parts += _trial_details(group)
    return Group(*parts)


def _trial_details(group: list[TrialResult]) -> list[Text | Padding]:
    result = group[0]
    head = Text.assemble(
        f"  {f.trial_label(group).lower()} ",
        _verdict(result.verdict),
        f" · {f.group_seconds(group)}",
    )
    notes = f.trial_notes(result)
    if notes:
        head.append(" · " + ", ".join(notes), style="dim")
    lines: list[Text | Padding] = [head]
    if result.error is not None:
        lines.append(_line(4, Verdict.ERROR, "error", f.error_text(result.error)))
    for score in f.non_passing_checks(result):
        lines.append(_line(4, score.verdict, score.name or "(unnamed)", f.score_reason(score)))
        lines += _assertion_lines(score.assertions, indent=6)
    if result.output is None:
        lines.append(_indented(Text("no output", style="dim italic"), 4))
    else:
        lines.append(_indented(Text("output:", style="dim"), 4))
        excerpt = f.truncate(result.output, OUTPUT_EXCERPT_CHARS)
        lines.append(_indented(_plain(excerpt, style="dim"), 6))
    return lines


def _indented(text: Text, indent: int) -> Padding:
    return Padding(text, (0, 0, 0, indent), expand=False)


def _line(indent: int, verdict: Verdict, name: str, reason: str | None) -> Padding:
    text = Text.assemble(Text(SYMBOLS[verdict], style=STYLES[verdict]), " ", _plain(name))
    if reason:
        text.append(": ")
        text.append(_plain(reason))
    return _indented(text, indent)


def _assertion_lines(assertions: list[Assertion], *, indent: int) -> list[Text | Padding]:
    lines: list[Text | Padding] = []
    for a in f.non_passing_assertions(assertions):
        lines.append(_line(indent, a.verdict, a.name, a.rationale))
        lines += _assertion_lines(a.assertions, indent=indent + 2)
    return lines
