"""The Markdown report, written to fit a GitHub Actions job summary (`$GITHUB_STEP_SUMMARY`).

User content (task ids, rationales, outputs) is untrusted text: it is escaped so that a `|`
cannot split a table cell, a `<` cannot open HTML, and a run of backticks cannot close a code
fence. The output depends only on the report, so it can be committed and diffed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from trialkit.consistency import consistency_notes
from trialkit.reports import _format as f
from trialkit.reports._budget import STEP_SUMMARY_LIMIT, Part, Row, Section, fit
from trialkit.reports._gate import calls_text, gate_headline
from trialkit.run.retries import retry_note
from trialkit.score import Assertion, Verdict
from trialkit.task import SuiteKind

if TYPE_CHECKING:
    from trialkit.report import Report, TaskReport, TrialResult

OUTPUT_EXCERPT_CHARS = 1000

EMOJI = {
    Verdict.PASS: "✅",
    Verdict.FAIL: "❌",
    Verdict.ERROR: "⚠️",
    Verdict.UNKNOWN: "❔",
}

_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#!$])")


def render_markdown(report: Report, *, limit: int | None = STEP_SUMMARY_LIMIT) -> str:
    """The report in Markdown, under `limit` UTF-8 bytes (GitHub's job summary limit by
    default; `None`: no limit): past it, the details of the least important failing tasks
    are cut first (capability failures and flaky passes before errors, errors before
    regression failures), then the task table's rows of passing tasks, and a closing note
    says how many were cut."""
    return fit(markdown_parts(report), limit)


def markdown_parts(report: Report) -> list[Part]:
    """The report's Markdown as parts that `fit` can cut to a size."""
    lines = [f"## trialkit · {inline(f.run_title(report))}", "", inline(f.run_subtitle(report))]
    lines += ["", *_gate_lines(report)]
    lines += ["", *_summary_table(report), ""]
    parts: list[Part] = [lines, _task_table(report)]
    failing = report.failing_tasks
    if failing:
        details = Section(
            what=("failing task's details", "failing tasks' details"),
            head=["", "### Tasks that did not pass every trial"],
            rows=[Row(["", *_task_details(task)], 1 + importance(task)) for task in failing],
        )
        parts.append(details)
    return parts


_PASSED = 4


def importance(task: TaskReport) -> int:
    """How much a task's result matters in a summary (0 most): a regression task that did not
    pass (it fails the gate), an error, a capability failure, a flaky pass, a pass."""
    if task.verdict is Verdict.PASS:
        return 3 if task.passed < task.trials else _PASSED
    if task.verdict is Verdict.ERROR:
        return 1
    return 0 if task.kind is SuiteKind.REGRESSION else 2


def _gate_lines(report: Report) -> list[str]:
    gate = report.gate()
    mark = EMOJI[Verdict.PASS] if gate.passed else EMOJI[Verdict.FAIL]
    lines = [f"**{mark} {inline(gate_headline(gate)).capitalize()}**"]
    lines += [f"- {inline(reason)}" for reason in gate.reasons]
    return [*lines, "", f"Model calls: {inline(calls_text(report))}."]


def inline(text: str, *, newline: str = " ") -> str:
    """Escape text for a Markdown paragraph, heading or table cell.

    Every character Markdown, GFM tables or GitHub's `$math$` could interpret is
    backslash-escaped, so user text shows exactly as written; newlines become `newline`
    (`<br>` keeps them in a table cell).
    """
    escaped = _SPECIAL.sub(r"\\\1", f.escape_controls(text))
    return escaped.replace("\n", newline)


def code_span(text: str) -> str:
    """Inline code that survives backticks in `text`: the delimiter is one backtick longer
    than the longest run inside (CommonMark), padded with spaces when `text` touches one."""
    text = f.escape_controls(text).replace("\n", " ")
    ticks = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def code_block(text: str, *, info: str = "text") -> list[str]:
    """A fenced block whose fence is longer than any backtick run in `text`, so output that
    contains a fence of its own cannot end the block early."""
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return [f"{fence}{info}", *f.escape_controls(text).split("\n"), fence]


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max((len(r) for r in runs), default=0)


def _table(header: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def _counts(counts: f.Counts) -> str:
    return ", ".join(f"{EMOJI[v]} {n} {f.COUNT_WORDS[v]}" for v, n in counts.items())


def _summary_table(report: Report) -> list[str]:
    s = report.summary
    rows = [
        ["Tasks", f"{s.tasks}: {_counts(f.task_counts(s))}"],
        ["Trials", f"{s.trials}: {_counts(f.trial_counts(s))}"],
        *([label, inline(value)] for label, value in f.summary_rows(report)),
    ]
    if s.pending:
        command = code_span(f"trialkit review {report.run.id}")
        rows.insert(2, ["Pending review", f"{s.pending} of {s.trials} trials ({command})"])
    lines = _table(["Metric", "Value"], rows, ["---", "---"])
    note = f.pass_k_note(report)
    if note:
        lines += ["", f"_{inline(note)}_"]
    retried = retry_note(report.run.config)
    if retried:
        lines += ["", f"**Retried trials:** {inline(retried)}"]
    for line in consistency_notes(report.run.config):
        lines += ["", f"_{inline(line)}_"]
    return lines


def _task_table(report: Report) -> Section:
    k = f.max_k(report)
    header = ["Task", "Kind", "Verdict", "Passed"]
    align = ["---", "---", "---", "---:"]
    if k is not None:
        header += [f"pass@{k}", f"pass^{k}"]
        align += ["---:", "---:"]
    header.append("Flaky")
    align.append(":---:")
    rows = []
    for task in report.tasks:
        row = [
            inline(task.id, newline="<br>"),
            f.kind_label(task),
            _verdict(task.verdict),
            f.trials_passed(task),
        ]
        if k is not None:
            row += [f.percent(task.pass_at_k.get(k)), f.percent(task.pass_hat_k.get(k))]
        row.append("🎲 flaky" if task.flaky else "")
        rows.append(Row(_table_row(row), 6 if importance(task) == _PASSED else 0))
    return Section(("task table row", "task table rows"), _table(header, [], align), rows)


def _table_row(cells: list[str]) -> list[str]:
    return ["| " + " | ".join(cells) + " |"]


def _verdict(verdict: Verdict) -> str:
    return f"{EMOJI[verdict]} {f.WORDS[verdict]}"


def _task_details(task: TaskReport) -> list[str]:
    lines = [
        f"#### {EMOJI[task.verdict]} {inline(task.id)} — {f.WORDS[task.verdict]} "
        f"({f.trials_passed(task)} trials passed)"
    ]
    for group in f.group_trials(f.non_passing_trials(task)):
        lines += ["", *_trial_details(group)]
    return lines


def _trial_details(group: list[TrialResult]) -> list[str]:
    result = group[0]
    took = f.group_seconds(group)
    head = f"**{f.trial_label(group)}** · {_verdict(result.verdict)} · {took}"
    notes = f.trial_notes(result)
    if notes:
        head += " · " + inline(", ".join(notes))
    lines = [head]
    items: list[str] = []
    if result.error is not None:
        items.append(f"- {EMOJI[Verdict.ERROR]} error: {inline(f.error_text(result.error))}")
    for score in f.non_passing_checks(result):
        items.append(_check_line(score.name, score.verdict, f.score_reason(score), depth=0))
        items += _assertion_lines(score.assertions, depth=1)
    if items:
        lines += ["", *items]
    lines.append("")
    if result.output is None:
        lines.append("_No output._")
    else:
        lines += code_block(f.truncate(result.output, OUTPUT_EXCERPT_CHARS))
    return lines


def _check_line(name: str, verdict: Verdict, reason: str | None, *, depth: int) -> str:
    line = f"{'  ' * depth}- {EMOJI[verdict]} {code_span(name or '(unnamed)')}"
    if reason:
        line += f": {inline(reason, newline='<br>')}"
    return line


def _assertion_lines(assertions: list[Assertion], *, depth: int) -> list[str]:
    lines = []
    for a in f.non_passing_assertions(assertions):
        lines.append(_check_line(a.name, a.verdict, a.rationale, depth=depth))
        lines += _assertion_lines(a.assertions, depth=depth + 1)
    return lines
