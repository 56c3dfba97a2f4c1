"""GitHub's side of CI: a pull request comment, workflow annotations and the job summary.

- `render_pr_comment(comparison)`: Markdown for a PR comment. A one-line verdict first (the
  gate's: worse, better, no significant change, nothing to compare, with the exact stratified
  test's p, the pass rate difference over tasks and its interval), then the conclusions (which
  name every task left out of the test) and the answer for tasks like these, then the
  significant changes (new failures, fixes, errors), then every other
  task collapsed in `<details>`, links to the HTML reports, and a hidden marker line
  (`COMMENT_MARKER`) by which a later run finds the comment to update it. It stays under
  GitHub's 65,536 characters, cutting the least important rows first.
- `annotations(report or comparison)`: `::error file=…,line=…,title=…::message` workflow
  commands at the line that defines each failing task (`TaskReport.file` / `line`), and
  `::warning` for errors, flaky tasks and failures that do not fail the gate.
- `render_job_summary(report, comparison=...)`: the comparison and the run's Markdown report,
  under GitHub's 1 MiB job summary limit (`$GITHUB_STEP_SUMMARY`).
"""

# No `from __future__ import annotations`: it would bind the name of `annotations()`.
from collections.abc import Sequence
from dataclasses import dataclass

from trialkit.analysis.compare import (
    Change,
    Comparison,
    PairedComparison,
    RunColumn,
    TaskCell,
    TaskComparison,
    points,
)
from trialkit.analysis.conclusion import p_text
from trialkit.report import Report, TaskReport, TrialResult
from trialkit.reports import _format as f
from trialkit.reports._budget import (
    PR_COMMENT_LIMIT,
    STEP_SUMMARY_LIMIT,
    Part,
    Row,
    Section,
    fit,
    utf8_bytes,
)
from trialkit.reports.compare import cell_text, run_who
from trialkit.reports.markdown import EMOJI, code_span, inline, markdown_parts
from trialkit.score import Verdict
from trialkit.task import SuiteKind

COMMENT_MARKER = "<!-- trialkit-comparison -->"
"""The hidden first line of a PR comment, by which `trialkit.ci.github` finds it again."""
MAX_ANNOTATIONS = 50
"""GitHub shows at most 10 error and 10 warning annotations per step and 50 per job."""

OUTCOME_LINES = {
    "worse": ("❌", "worse than the baseline on these tasks"),
    "better": ("✅", "better than the baseline on these tasks"),
    "no_difference": ("➖", "no significant change from the baseline on these tasks"),
    "cannot_tell": ("❔", "nothing to compare with the baseline (no task decided in both)"),
}

_SIGNIFICANT: list[tuple[Change, str, str]] = [
    ("new_failure", "New failures", "new failure"),
    ("fixed", "Fixed", "fix"),
    ("error", "Errors", "errored task"),
]


# -- the PR comment ----------------------------------------------------------------------------


def render_pr_comment(
    comparison: Comparison,
    *,
    report_urls: Sequence[str] = (),
    blob_url: str | None = None,
    marker: str | None = COMMENT_MARKER,
    limit: int | None = PR_COMMENT_LIMIT,
) -> str:
    """The comparison as a PR comment, under `limit` characters.

    `report_urls`: the HTML report of the latest run (one URL) or of every run, in order.
    `blob_url`: where the repository's files are shown at this commit
    (`https://github.com/OWNER/REPO/blob/SHA/`), to link each task to its line.
    """
    parts = comment_parts(comparison, report_urls=report_urls, blob_url=blob_url)
    if marker is not None:
        parts.insert(0, [marker])
    return fit(parts, limit, measure=len, where="the JSON or HTML report")


def comment_parts(
    comparison: Comparison, *, report_urls: Sequence[str] = (), blob_url: str | None = None
) -> list[Part]:
    runs = comparison.runs
    head = [summary_line(pair) for pair in comparison.pairs]
    for pair in comparison.pairs:
        head += ["", inline(pair.conclusion), "", inline(pair.suite_conclusion)]
    suites = ", ".join(dict.fromkeys(code_span(run.suite_id) for run in runs))
    against = "; ".join(
        f"{pair.candidate}: {inline(run_who(_run(comparison, pair.candidate)))}"
        for pair in comparison.pairs
    )
    head += ["", f"Suite {suites} · baseline A: {inline(run_who(runs[0]))} · {against}"]
    links = _links(comparison, report_urls)
    if links:
        head += ["", links]
    parts: list[Part] = [head]
    several = len(comparison.pairs) > 1
    for i, pair in enumerate(comparison.pairs):
        parts += _pair_sections(comparison, i, pair, several, blob_url)
    return parts


def summary_line(pair: PairedComparison) -> str:
    """`❌ **trialkit: worse than the baseline on these tasks**: exact stratified test p = 4.8e-09
    · pass rate 95.8% → 45.8% (mean over tasks), −50.0 pts (95% CI …) · 8 new failures, 2
    fixed, 1 errored, 1 not compared, of 13 tasks`."""
    mark, words = OUTCOME_LINES[pair.outcome]
    who = f"{pair.candidate} is " if pair.candidate != "B" else ""
    line = f"{mark} **trialkit: {who}{words}**"
    figures = []
    if pair.trial_test is not None:
        figures.append(f"exact stratified test {p_text(pair.trial_test.p_value)}")
    if pair.difference is not None:
        rates = f"{f.percent(pair.pass_rate_baseline)} → {f.percent(pair.pass_rate_candidate)}"
        difference = points(pair.difference)
        if pair.difference_ci is not None:
            low, high = pair.difference_ci
            level = f"{pair.confidence:.0%}"
            difference += f" ({level} CI {points(low, unit='')} to {points(high)})"
        figures.append(f"pass rate {rates} (mean over tasks), {difference}")
    if figures:
        line += ": " + " · ".join(figures)
    left_out = f"{len(pair.left_out)} not compared, " if pair.left_out else ""
    counts = (
        f"{len(pair.new_failures)} new failures, {len(pair.fixed)} fixed, "
        f"{len(pair.error_tasks)} errored, {left_out}of {pair.paired_tasks} tasks"
    )
    return f"{line} · {counts}"


def _run(comparison: Comparison, label: str) -> RunColumn:
    return next(run for run in comparison.runs if run.label == label)


def _links(comparison: Comparison, report_urls: Sequence[str]) -> str:
    urls = list(report_urls)
    if not urls:
        return ""
    runs = comparison.runs
    if len(urls) == 1:
        pairs = [(runs[-1], urls[0])]
    elif len(urls) == len(runs):
        pairs = list(zip(runs, urls, strict=True))
    else:
        raise ValueError(
            f"{len(urls)} report URLs for {len(runs)} runs: give one (the latest run's) or one "
            "per run"
        )
    shown = [f"[{run.label} · {inline(run_who(run))}]({_url(url)})" for run, url in pairs if url]
    return "📄 HTML report: " + " · ".join(shown)


def _url(url: str) -> str:
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")


def _pair_sections(
    comparison: Comparison, index: int, pair: PairedComparison, several: bool, blob: str | None
) -> list[Part]:
    b = pair.candidate
    column = index + 1
    header = ["Task", "Where", "A", b, "Δ pass rate"]
    align = ["---", "---", "---", "---", "---:"]
    by_change: dict[Change, list[TaskComparison]] = {}
    for task in comparison.tasks:
        by_change.setdefault(task.changes[index].change, []).append(task)
    parts: list[Part] = []
    for rank, (change, title, noun) in enumerate(_SIGNIFICANT):
        tasks = by_change.pop(change, [])
        if not tasks:
            continue
        heading = f"### {title}{f' in {b}' if several else ''} ({len(tasks)})"
        rows = [Row([_row(t, index, column, blob)], rank) for t in tasks]
        parts.append(
            Section((noun, noun + "s"), ["", heading, "", *_table_head(header, align)], rows)
        )
    rest = [t for ts in by_change.values() for t in ts]
    rest.sort(key=lambda t: _rest_rank(t, index, column))
    if rest:
        kinds = sorted({t.changes[index].change for t in rest}, key=_CHANGE_ORDER.index)
        other = "1 other task" if len(rest) == 1 else f"{len(rest)} other tasks"
        summary = f"{other}{f' in {b}' if several else ''} ({', '.join(kinds)})"
        parts.append(
            Section(
                ("other task", "other tasks"),
                [
                    "",
                    f"<details><summary>{inline(summary)}</summary>",
                    "",
                    *_table_head(header, align),
                ],
                [
                    Row([_row(t, index, column, blob)], 3 + _rest_rank(t, index, column))
                    for t in rest
                ],
                ["", "</details>"],
            )
        )
    return parts


_CHANGE_ORDER: list[Change] = [
    "new_failure",
    "fixed",
    "error",
    "unknown",
    "added",
    "removed",
    "unchanged",
]


def _rest_rank(task: TaskComparison, index: int, column: int) -> int:
    cell = task.cells[column]
    change = task.changes[index].change
    if cell is not None and (cell.flaky or cell.verdict is not Verdict.PASS):
        return 0 if change == "unchanged" else 1
    return 1 if change != "unchanged" else 2


def _table_head(header: list[str], align: list[str]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]


def _row(task: TaskComparison, index: int, column: int, blob: str | None) -> str:
    base, cell = task.cells[0], task.cells[column]
    change = task.changes[index]

    def shown(c: TaskCell | None) -> str:
        if c is None:
            return "—"
        flaky = " 🎲" if c.flaky else ""
        return f"{EMOJI[c.verdict]} {cell_text(c)}{flaky}"

    delta = f.NA if change.pass_rate_delta is None else points(change.pass_rate_delta)
    cells = [inline(task.id, newline="<br>"), _where(task, blob), shown(base), shown(cell), delta]
    return "| " + " | ".join(cells) + " |"


def _where(task: TaskComparison | TaskReport, blob: str | None) -> str:
    if not task.file:
        return ""
    place = task.file if task.line is None else f"{task.file}:{task.line}"
    if blob is None or task.file.startswith(("/", "..")):
        return code_span(place)
    anchor = "" if task.line is None else f"#L{task.line}"
    return f"[{code_span(place)}]({_url(blob + task.file)}{anchor})"


# -- annotations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Note:
    rank: int
    level: str  # "error" | "warning"
    file: str | None
    line: int | None
    title: str
    message: str


def annotations(source: Report | Comparison, *, limit: int = MAX_ANNOTATIONS) -> list[str]:
    """GitHub workflow commands that mark the line defining each task that needs a look.

    Of a report: `::error` for a regression task that did not pass (it fails the gate),
    `::warning` for a capability task that failed (it does not), an errored task and a flaky
    one. Of a comparison (the latest run against the baseline): `::error` for a new failure and
    for a regression task still failing, `::warning` for errors, flaky tasks and capability
    tasks still failing. Most important first, at most `limit`, then a `::notice` of the rest.
    """
    notes = _report_notes(source) if isinstance(source, Report) else _comparison_notes(source)
    notes.sort(key=lambda n: n.rank)
    lines = [_command(n) for n in notes[:limit]]
    if len(notes) > limit:
        more = len(notes) - limit
        text = f"{more:,} more tasks to look at are not annotated: see the report"
        lines.append(f"::notice title=trialkit::{escape_data(text)}")
    return lines


def _report_notes(report: Report) -> list[_Note]:
    notes = []
    for task in report.tasks:
        passed = f"{f.trials_passed(task)} trials passed"
        reason = _first_reason(task)
        message = passed + (f"; {reason}" if reason else "")
        if task.verdict in (Verdict.FAIL, Verdict.UNKNOWN):
            gate = task.kind is SuiteKind.REGRESSION
            word = f.WORDS[task.verdict]
            title = f"{task.id}: {word}" + (
                "" if gate else " (capability task: not a gate failure)"
            )
            notes.append(
                _Note(
                    0 if gate else 2,
                    "error" if gate else "warning",
                    task.file,
                    task.line,
                    title,
                    message,
                )
            )
        elif task.verdict is Verdict.ERROR:
            notes.append(_Note(1, "warning", task.file, task.line, f"{task.id}: error", message))
        elif task.flaky:
            notes.append(_Note(3, "warning", task.file, task.line, f"{task.id}: flaky", message))
    return notes


def _comparison_notes(comparison: Comparison) -> list[_Note]:
    index = len(comparison.pairs) - 1
    if index < 0:
        return []
    b = comparison.pairs[index].candidate
    column = index + 1
    notes = []
    for task in comparison.tasks:
        base, cell = task.cells[0], task.cells[column]
        change = task.changes[index].change
        if cell is None:
            continue
        was = "—" if base is None else f"{f.WORDS[base.verdict]} {cell_text(base)}"
        message = f"baseline A: {was}; {b}: {f.WORDS[cell.verdict]} {cell_text(cell)}"
        if change == "new_failure":
            notes.append(
                _Note(0, "error", task.file, task.line, f"{task.id}: new failure", message)
            )
        elif change == "error":
            notes.append(_Note(2, "warning", task.file, task.line, f"{task.id}: error", message))
        elif cell.verdict in (Verdict.FAIL, Verdict.UNKNOWN):
            gate = task.kind is SuiteKind.REGRESSION
            title = f"{task.id}: still {f.WORDS[cell.verdict]}"
            notes.append(
                _Note(
                    1 if gate else 3,
                    "error" if gate else "warning",
                    task.file,
                    task.line,
                    title,
                    message,
                )
            )
        elif cell.flaky:
            notes.append(_Note(4, "warning", task.file, task.line, f"{task.id}: flaky", message))
    return notes


def _first_reason(task: TaskReport) -> str:
    for result in f.non_passing_trials(task):
        return f"trial #{result.trial}: {_reason(result)}"
    return ""


def _reason(result: TrialResult) -> str:
    if result.error is not None:
        return f.error_text(result.error)
    for score in f.non_passing_checks(result):
        reason = f.score_reason(score)
        return f"{score.name}: {reason}" if reason else f"{score.name} {f.WORDS[score.verdict]}"
    return f.WORDS[result.verdict]


_MESSAGE_CHARS = 1000


def _command(note: _Note) -> str:
    props = []
    if note.file:
        props.append(f"file={escape_property(note.file)}")
        if note.line is not None:
            props.append(f"line={note.line}")
    props.append(f"title={escape_property(f.truncate(note.title, 200))}")
    message = f.truncate(note.message, _MESSAGE_CHARS)
    return f"::{note.level} {','.join(props)}::{escape_data(message)}"


def escape_data(text: str) -> str:
    """A workflow command's message, escaped as `@actions/core` does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: also `:` and `,`, which end one."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


# -- the job summary ---------------------------------------------------------------------------


def render_job_summary(
    report: Report,
    *,
    comparison: Comparison | None = None,
    report_urls: Sequence[str] = (),
    blob_url: str | None = None,
    limit: int | None = STEP_SUMMARY_LIMIT,
) -> str:
    """The job summary (`$GITHUB_STEP_SUMMARY`): the comparison with the baseline when there is
    one (as the PR comment shows it), then the run's Markdown report, all under `limit` UTF-8
    bytes: the least important rows are cut first, with a note of what was cut."""
    parts: list[Part] = []
    if comparison is not None:
        parts += comment_parts(comparison, report_urls=report_urls, blob_url=blob_url)
        parts.append([""])
    parts += markdown_parts(report)
    return fit(parts, limit, measure=utf8_bytes)
