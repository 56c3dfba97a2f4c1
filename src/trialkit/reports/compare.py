"""`Comparison` rendered for the terminal and as Markdown; its JSON is `Comparison.to_json`.

Two runs get one row per task with both runs' pass counts and the deltas; more runs get one
column per run (a model matrix), each marked where it changed from the baseline. Then, for
each later run, the statistics against the baseline and the conclusion in one sentence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from trialkit.analysis._significance import confidence_text
from trialkit.analysis.conclusion import detectable_text, p_text, plural, points
from trialkit.reports import _format as f
from trialkit.reports._table import Column, print_figures, print_line, print_table
from trialkit.reports.markdown import EMOJI, inline
from trialkit.reports.terminal import STYLES, SYMBOLS

if TYPE_CHECKING:  # the records import this module to render themselves (`to_markdown`)
    from trialkit.analysis.compare import (
        Change,
        Comparison,
        PairedComparison,
        RunColumn,
        TaskCell,
        TaskComparison,
    )

MAX_NAMED = 10
"""Task lists (new failures, fixes, …) name this many tasks, then say how many more."""

CHANGE_WORDS: dict[Change, str] = {
    "unchanged": "",
    "new_failure": "new failure",
    "fixed": "fixed",
    "error": "error",
    "unknown": "unknown",
    "added": "added",
    "removed": "removed",
}
CHANGE_STYLES: dict[Change, str] = {
    "new_failure": "bold red",
    "fixed": "green",
    "error": "yellow",
    "unknown": "magenta",
    "added": "dim",
    "removed": "dim",
}
MARKS: dict[Change, str] = {"new_failure": "↓", "fixed": "↑"}
OUTCOME_STYLES = {"worse": "bold red", "better": "bold green"}


# -- shared wording ----------------------------------------------------------------------------


def compare_title(comparison: Comparison) -> str:
    suites = list(dict.fromkeys(run.suite_id for run in comparison.runs))
    label = "suite" if len(suites) == 1 else "suites"
    return f"trialkit compare · {label} {', '.join(suites)}"


def run_heading(run: RunColumn) -> str:
    """`A · gpt-4o-mini`: the label and what ran (model, else harness)."""
    return f"{run.label} · {run.agent}" if run.agent else run.label


def run_who(run: RunColumn) -> str:
    return f"{run.name} ({run.id})" if run.name else run.id


def cell_text(cell: TaskCell | None) -> str:
    """`4/5 80.0%`: passed of the decided trials, then that as a rate; errored and unknown
    trials are in neither (the verdict says when they decided the task)."""
    if cell is None:
        return "—"
    return f"{cell.passed}/{cell.passed + cell.failed} {f.percent(cell.pass_rate)}"


def signed(value: float | None, unit: str = "", digits: int = 3, prefix: str = "") -> str:
    if value is None:
        return f.NA
    shown = f"{abs(value):.{digits}f}"
    if float(shown) == 0:
        return f"{prefix}{shown}{unit}"
    return f"{'+' if value > 0 else '−'}{prefix}{shown}{unit}"


def delta_points(value: float | None) -> str:
    return f.NA if value is None else points(value)


def named(tasks: list[str]) -> str:
    """`3: a, b, c`, naming at most `MAX_NAMED` tasks; `none` for none."""
    return f"{len(tasks)}: {names(tasks)}" if tasks else "none"


def names(tasks: list[str]) -> str:
    shown = ", ".join(tasks[:MAX_NAMED])
    more = len(tasks) - MAX_NAMED
    return shown + (f" … and {more} more" if more > 0 else "")


def pair_rows(pair: PairedComparison) -> list[tuple[str, str]]:
    """The figures of one later run against the baseline, in reading order: the tasks, then
    the gate's question (these tasks), then tasks like these, then the whole-run deltas."""
    a, b = pair.baseline, pair.candidate
    level = confidence_text(pair.confidence)
    rows = [
        (
            "Tasks in both runs",
            f"{pair.paired_tasks} ({pair.rate_tasks} with decided trials in both)",
        ),
        (f"New failures in {b}", named(pair.new_failures)),
        (f"Fixed in {b}", named(pair.fixed)),
        ("Errored in either run", named(pair.error_tasks)),
    ]
    if pair.unknown_tasks:
        rows.append(("Unknown in either run", named(pair.unknown_tasks)))
    if pair.left_out:
        shown = [f"{t.id} ({t.reason})" for t in pair.left_out]
        rows.append(("Not compared", f"{len(shown)}: {names(shown)}"))
    rows += [
        ("These tasks: exact stratified test (the gate)", _trial_test_text(pair)),
        ("These tasks: changed on their own", _changed_text(pair)),
        ("These tasks: smallest detectable change", detectable_text(pair.trial_test)),
        (f"Pass rate {a} → {b} (mean over tasks in both)", _rates(pair)),
        (f"Tasks like these: difference {b} − {a}", _difference_text(pair, level)),
        ("Tasks like these: sign-flip test over tasks", _flip_text(pair)),
        ("Tasks like these: smallest detectable change", _task_detectable(pair)),
        ("Exact McNemar test (task verdicts)", _mcnemar_text(pair)),
        ("Mean score Δ (whole runs)", signed(pair.mean_score_delta)),
        ("Cost per trial Δ (whole runs)", signed(pair.cost_per_trial_delta, digits=4, prefix="$")),
        ("Latency p50 Δ (whole runs)", signed(pair.latency_p50_delta_s, " s", digits=2)),
    ]
    return rows


def _rates(pair: PairedComparison) -> str:
    return f"{f.percent(pair.pass_rate_baseline)} → {f.percent(pair.pass_rate_candidate)}"


def _trial_test_text(pair: PairedComparison) -> str:
    test = pair.trial_test
    if test is None:
        return f"{f.NA} (no task has decided trials in both runs)"
    if not test.informative_tasks:
        return "p = 1 (every task's trials passed in both runs or failed in both)"
    cmh = ""
    if test.cmh_statistic is not None and test.cmh_p_value is not None:
        cmh = f"; CMH χ² = {test.cmh_statistic:.3g}, p = {test.cmh_p_value:.3g}"
    return (
        f"{p_text(test.p_value)} ({pair.candidate} passed {plural(test.passed_b, 'trial')}, "
        f"{test.expected_b:.1f} expected, over {test.informative_tasks} tasks that can vary{cmh})"
    )


def _changed_text(pair: PairedComparison) -> str:
    test = pair.trial_test
    if test is None or not test.task_tests:
        return "none tested"
    significant = [
        f"{t.id} {t.passed_a}/{t.decided_a} → {t.passed_b}/{t.decided_b} (adjusted p = "
        f"{t.adjusted_p_value:.3g})"
        for t in test.task_tests
        if t.significant
    ]
    method = f"Fisher's exact test, Holm-adjusted over {len(test.task_tests)} tasks"
    if not significant:
        return f"none significant alone ({method})"
    return f"{len(significant)}: {names(significant)} ({method})"


def _difference_text(pair: PairedComparison, level: str) -> str:
    if pair.difference is None:
        return f.NA
    if pair.difference_ci is None:
        return f"{points(pair.difference)} (no interval: one task)"
    low, high = pair.difference_ci
    return (
        f"{points(pair.difference)} ({level} CI {points(low, unit='')} to {points(high)}; "
        f"t interval over {pair.rate_tasks} tasks)"
    )


def _flip_text(pair: PairedComparison) -> str:
    test = pair.task_test
    if test is None:
        return f.NA
    how = "exact" if test.exact else f"{test.resamples:,} random flips, seed {pair.seed}"
    text = (
        f"{p_text(test.sign_flip_p_value)} ({how}; {test.changed_tasks} of {test.tasks} tasks "
        f"changed; smallest possible p = {test.smallest_p:.3g})"
    )
    if pair.suite_outcome == "too_few_tasks":
        text += ": too few tasks to tell"
    return text


def _task_detectable(pair: PairedComparison) -> str:
    test = pair.task_test
    if test is None:
        return f.NA
    if test.detectable is None:
        return f"none: too few tasks for any test over tasks to reach {1 - pair.confidence:.2g}"
    return f"{test.detectable * 100:.1f} pts mean over tasks (80% power)"


def _mcnemar_text(pair: PairedComparison) -> str:
    if pair.mcnemar_p_value is None:
        return f"{f.NA} (no task passed or failed in both runs)"
    return (
        f"p = {pair.mcnemar_p_value:.3g} ({len(pair.new_failures)} new failures, "
        f"{len(pair.fixed)} fixed, of {pair.decided_tasks} tasks decided in both)"
    )


def run_rows(run: RunColumn) -> list[str]:
    return [
        run.label,
        run_who(run),
        run.agent or f.NA,
        run.started_at.strftime("%Y-%m-%d %H:%M"),
        run.status,
        str(run.tasks),
        str(run.trials),
        _rate(run),
        f.number(run.mean_score),
        f.cost(run.cost_per_trial),
        f.seconds(run.latency_p50_s),
    ]


def _rate(run: RunColumn) -> str:
    if run.pass_rate_ci is None:
        return f.percent(run.pass_rate)
    return f"{f.percent(run.pass_rate)} ({f.interval(run.pass_rate_ci)})"


RUN_HEADER = [
    "Run",
    "Id",
    "Model",
    "Started",
    "Status",
    "Tasks",
    "Trials",
    "Pass rate (95% CI)",
    "Mean score",
    "Cost/trial",
    "p50",
]
DELTA_HEADER = ["Δ rate", "Δ score", "Δ cost/trial", "Δ p50", "Change"]


def delta_cells(task: TaskComparison) -> list[str]:
    change = task.changes[0]
    return [
        delta_points(change.pass_rate_delta),
        signed(change.mean_score_delta),
        signed(change.cost_per_trial_delta, digits=4, prefix="$"),
        signed(change.latency_p50_delta_s, " s", digits=2),
    ]


# -- terminal ----------------------------------------------------------------------------------


def render_compare_terminal(comparison: Comparison, console: Console) -> None:
    print_line(console, _plain(compare_title(comparison), style="bold"))
    print_table(console, RUN_COLUMNS, [_run_cells(run) for run in comparison.runs])
    console.print()
    _print_tasks(comparison, console)
    for pair in comparison.pairs:
        console.print()
        print_line(console, _plain(f"{pair.candidate} against {pair.baseline}", style="bold"))
        print_figures(console, [(_plain(label), _plain(value)) for label, value in pair_rows(pair)])
        style = OUTCOME_STYLES.get(pair.outcome, "bold")
        print_line(console, _plain(pair.conclusion, style=style))
        print_line(console, _plain(pair.suite_conclusion))


def _plain(text: str, style: str = "") -> Text:
    return Text(f.escape_controls(text), style=style)


RUN_COLUMNS = [
    Column("Run"),
    Column("Id"),
    Column("Name", fit="fold", drop=3),
    Column("Model", fit="fold", drop=2),
    Column("Started", fit="words", drop=6),
    Column("Status", drop=5),
    Column("Tasks", justify="right", drop=7),
    Column("Trials", justify="right", drop=7),
    Column("Pass rate (95% CI)", fit="words", justify="right", drop=1),
    Column("Mean score", justify="right", drop=4),
    Column("Cost/trial", justify="right", drop=8),
    Column("p50", justify="right", drop=8),
]
"""The terminal's runs table: `RUN_HEADER` with the name apart from the id, so the id is never
wrapped with it."""


def _run_cells(run: RunColumn) -> list[Text]:
    label, _, *rest = run_rows(run)
    return [_plain(value) for value in (label, run.id, run.name or "", *rest)]


def _print_tasks(comparison: Comparison, console: Console) -> None:
    two = len(comparison.runs) == 2
    columns = [Column("Task")]
    columns += [Column(run_heading(run), short=run.label) for run in comparison.runs]
    if two:
        drops = [2, 4, 5, 5]
        for name, drop in zip(DELTA_HEADER[:-1], drops, strict=True):
            columns.append(Column(name, justify="right", drop=drop))
        columns.append(Column(DELTA_HEADER[-1], fit="words", drop=1))
    rows = []
    for task in comparison.tasks:
        row = [_plain(task.id), _cell(task.cells[0], None)]
        for cell, against in zip(task.cells[1:], task.changes, strict=True):
            row.append(_cell(cell, None if two else against.change))
        if two:
            change = task.changes[0].change
            row += [Text(value) for value in delta_cells(task)]
            row.append(Text(CHANGE_WORDS[change], style=CHANGE_STYLES.get(change, "")))
        rows.append(row)
    print_table(console, columns, rows)


def _cell(cell: TaskCell | None, change: Change | None) -> Text:
    if cell is None:
        return Text("—", style="dim")
    text = Text.assemble(
        Text(SYMBOLS[cell.verdict], style=STYLES[cell.verdict]), " ", cell_text(cell)
    )
    if change in MARKS:
        text.append(f" {MARKS[change]}", style=CHANGE_STYLES[change])
    return text


# -- Markdown ----------------------------------------------------------------------------------


def md_table(header: list[str], rows: list[list[str]], align: list[str]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render_compare_markdown(comparison: Comparison) -> str:
    lines = [f"## {inline(compare_title(comparison))}", ""]
    align = ["---"] * 5 + ["---:"] * 6
    lines += md_table(
        RUN_HEADER, [[inline(v) for v in run_rows(run)] for run in comparison.runs], align
    )
    for pair in comparison.pairs:
        lines += ["", f"### {pair.candidate} against {pair.baseline}", ""]
        emoji = {"worse": "❌ ", "better": "✅ "}.get(pair.outcome, "")
        lines += [f"**{emoji}{inline(pair.conclusion)}**", "", inline(pair.suite_conclusion), ""]
        rows = [[inline(label), inline(value)] for label, value in pair_rows(pair)]
        lines += md_table(["Figure", "Value"], rows, ["---", "---"])
    lines += ["", "### Tasks", "", *_md_tasks(comparison)]
    return "\n".join(lines) + "\n"


def _md_tasks(comparison: Comparison) -> list[str]:
    two = len(comparison.runs) == 2
    header = ["Task", *(inline(run_heading(run)) for run in comparison.runs)]
    align = ["---", *(["---:"] * len(comparison.runs))]
    if two:
        header += DELTA_HEADER
        align += ["---:"] * 4 + ["---"]
    rows = []
    for task in comparison.tasks:
        row = [inline(task.id, newline="<br>"), _md_cell(task.cells[0], None)]
        for cell, against in zip(task.cells[1:], task.changes, strict=True):
            row.append(_md_cell(cell, None if two else against.change))
        if two:
            change = task.changes[0].change
            word = CHANGE_WORDS[change]
            row += [inline(cell) for cell in delta_cells(task)]
            row.append(f"**{word}**" if change == "new_failure" else word)
        rows.append(row)
    return md_table(header, rows, align)


def _md_cell(cell: TaskCell | None, change: Change | None) -> str:
    if cell is None:
        return "—"
    text = f"{EMOJI[cell.verdict]} {cell_text(cell)}"
    return f"{text} {MARKS[change]}" if change in MARKS else text
