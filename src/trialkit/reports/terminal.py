"""The terminal report: the Markdown report's figures, as rich tables.

User content goes in as `Text` objects, never as markup strings, so model output such as
`[bold]` or `:warning:` prints literally; control characters are shown escaped so an ANSI
sequence in an output cannot restyle or clear the terminal.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.padding import Padding
from rich.text import Text

from trialkit.consistency import consistency_notes
from trialkit.report import Report, TaskReport, TrialResult
from trialkit.reports import _format as f
from trialkit.reports._table import Column, print_figures, print_line, print_table
from trialkit.run.retries import retry_note
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
MAX_LISTED_TASKS = 100
"""Rows of the task table: past it, the tasks that need a look are listed first, the rest
counted in one line (a table of 10,000 rows is not read, and takes seconds to print)."""


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
            more = (
                f"… and {len(rest)} more tasks with non-passing trials: {names} "
                f"(see `trialkit report {report.run.id} --format md`)"
            )
            print_line(console, _plain(more, style="dim"))
        console.print()
    _print_tasks(report, console)
    console.print()
    _print_summary(report, console)
    s = report.summary
    if s.pending:
        line = f"Pending review: {s.pending} of {s.trials} trials (trialkit review {report.run.id})"
        print_line(console, _plain(line, style="bold magenta"))
    ending = f.run_ending(report)
    if ending:
        print_line(console, _plain(ending[0].upper() + ending[1:], style="bold yellow"))
    note = f.pass_k_note(report)
    if note:
        print_line(console, _plain(note, style="dim"))
    retried = retry_note(report.run.config)
    if retried:
        print_line(console, _plain(retried, style="yellow"))
    for line in consistency_notes(report.run.config):
        print_line(console, _plain(line, style="dim"))


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


def _print_summary(report: Report, console: Console) -> None:
    print_line(console, _plain(f"trialkit · {f.run_title(report)}", style="bold"))
    s = report.summary
    rows: list[tuple[Text | str, Text | str]] = [
        ("Tasks", _counts(s.tasks, f.task_counts(s))),
        ("Trials", _counts(s.trials, f.trial_counts(s))),
        *f.summary_rows(report),
    ]
    print_figures(console, rows)
    print_line(console, _plain(f.run_started(report)))


def _print_tasks(report: Report, console: Console) -> None:
    k = f.max_k(report)
    columns = [
        Column("Task"),
        Column("Kind", drop=6),
        Column("Verdict", drop=1),
        Column("Passed", justify="right", drop=1),
    ]
    if k is not None:
        columns.append(Column(f"pass@{k}", justify="right", drop=3))
        columns.append(Column(f"pass^{k}", justify="right", drop=4))
    columns.append(Column("Notes", fit="fold", drop=2))
    rows = []
    shown, hidden = _listed_tasks(report.tasks)
    for task in shown:
        row = [_plain(task.id), Text(task.kind.value), _verdict(task.verdict)]
        row.append(Text(f.trials_passed(task)))
        if k is not None:
            row.append(Text(f.percent(task.pass_at_k.get(k))))
            row.append(Text(f.percent(task.pass_hat_k.get(k))))
        rows.append([*row, _notes(task)])
    print_table(console, columns, rows)
    if hidden:
        passed = sum(t.verdict is Verdict.PASS for t in hidden)
        which = "all passed" if passed == len(hidden) else f"{passed} passed"
        more = (
            f"… and {len(hidden):,} more tasks ({which}): "
            f"`trialkit report {report.run.id} --format md` lists every task"
        )
        print_line(console, _plain(more, style="dim"))


def _listed_tasks(tasks: list[TaskReport]) -> tuple[list[TaskReport], list[TaskReport]]:
    """The tasks the table shows, in the report's order, and those it leaves out: every task
    when they fit, else those that did not pass or are flaky first, then the others."""
    if len(tasks) <= MAX_LISTED_TASKS:
        return tasks, []
    looked_at = [i for i, t in enumerate(tasks) if t.verdict is not Verdict.PASS or t.flaky]
    others = (i for i, t in enumerate(tasks) if t.verdict is Verdict.PASS and not t.flaky)
    picked = set(looked_at[:MAX_LISTED_TASKS])
    for i in others:
        if len(picked) >= MAX_LISTED_TASKS:
            break
        picked.add(i)
    shown = [t for i, t in enumerate(tasks) if i in picked]
    hidden = [t for i, t in enumerate(tasks) if i not in picked]
    return shown, hidden


def _notes(task: TaskReport) -> Text:
    """What the other cells do not say, among them the trials that were not decided: the
    passed count is of all trials, pass@k of the decided ones."""
    notes = []
    if task.flaky:
        notes.append(Text("flaky", style="yellow"))
    if task.expect == "failure":
        notes.append(Text("expects failure"))
    if task.pending:
        notes.append(Text(f"{task.pending} pending review"))
    undecided = [(task.errors, Verdict.ERROR), (task.unknown, Verdict.UNKNOWN)]
    for n, verdict in undecided:
        if n:
            notes.append(Text(f"{n} {f.COUNT_WORDS[verdict]}", style=STYLES[verdict]))
    return Text(", ").join(notes)


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
