"""Figures and wording shared by the human-readable reports, so Markdown and the terminal agree.

Every formatter turns `None` into "n/a": a figure with no data is unknown, and printing it as
0 would claim a measurement that was never made.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trialkit._record import ErrorInfo
from trialkit.score import Assertion, Score, Verdict
from trialkit.transcript import Usage
from trialkit.trial import TrialStatus

if TYPE_CHECKING:
    from trialkit.report import Report, Summary, TaskReport, TrialResult

NA = "n/a"

WORDS = {
    Verdict.PASS: "pass",
    Verdict.FAIL: "fail",
    Verdict.ERROR: "error",
    Verdict.UNKNOWN: "unknown",
}

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def escape_controls(text: str) -> str:
    """Show control characters as `\\xNN` so an ANSI escape in model output cannot restyle,
    move or clear the reader's terminal, and a NUL cannot truncate a CI log. Lone surrogates
    become `\\udNNN` because no UTF-8 file or terminal can take them."""
    return _CONTROL.sub(_escape_one, text.replace("\r\n", "\n"))


def _escape_one(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TERMINAL_SEQUENCE = re.compile(
    r"""
    \x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?       # CSI: colours, cursor moves, clears
    | \x1b[]P^_X][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?  # OSC, DCS…: a string to its end
    | \x1b[\x20-\x2f]*[\x30-\x7e]?                     # any other escape sequence
    """,
    re.VERBOSE,
)
_STRIPPED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ANY_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def strip_controls(text: str) -> str:
    """`text` without terminal control: escape sequences (ANSI colours, cursor moves, window
    titles) removed whole, other C0 and C1 control characters removed (a tab and a newline
    stay, a CRLF becomes a newline), lone surrogates shown as U+FFFD. For pages, where text is
    read rather than copied: the file reports show them as `\\xNN` (`escape_controls`)."""
    if _ANY_CONTROL.search(text) is None:
        return text
    text = _TERMINAL_SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return _SURROGATE.sub("\ufffd", _STRIPPED.sub("", text))


def truncate(text: str, limit: int) -> str:
    """Cut `text` to `limit` characters and say how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


def percent(value: float | None) -> str:
    return NA if value is None else f"{value:.1%}"


def interval(ci: tuple[float, float] | None) -> str:
    return NA if ci is None else f"{ci[0]:.1%}–{ci[1]:.1%}"


def rate_with_ci(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return NA
    if ci is None:
        return percent(value)
    return f"{percent(value)} (95% CI {interval(ci)})"


def seconds(value: float | None) -> str:
    return NA if value is None else f"{value:.2f} s"


def number(value: float | None) -> str:
    return NA if value is None else f"{value:.3f}"


def cost(value: float | None) -> str:
    return NA if value is None else f"${value:.4f}"


def tokens(usage: Usage, grader_usage: Usage | None = None) -> str:
    """All tokens, with the agent's and the graders' apart when graders used any.

    Empty usage means no model call was recorded (e.g. a plain function harness), so the
    count is unknown rather than zero.
    """
    if grader_usage is None or grader_usage.is_empty():
        if usage.is_empty():
            return NA
        return f"{usage.total_tokens:,} ({_in_out(usage, ', ')})"
    total = usage.total_tokens + grader_usage.total_tokens
    agent = NA if usage.is_empty() else _in_out(usage, " / ")
    return f"{total:,} (agent {agent}; graders {_in_out(grader_usage, ' / ')})"


def _in_out(usage: Usage, sep: str) -> str:
    return f"{usage.input_tokens:,} in{sep}{usage.output_tokens:,} out"


def total_cost(total: float | None, graders: float | None, grader_usage: Usage) -> str:
    """The total cost, with the graders' part when graders made any call."""
    if grader_usage.is_empty() and not graders:
        return cost(total)
    return f"{cost(total)} (graders {cost(graders)})"


def shown_ks(table: dict[str, float]) -> list[str]:
    """k = 1, the largest k, and a middle k when the curve is long enough to have a shape."""
    ks = sorted(int(k) for k in table)
    if not ks:
        return []
    chosen = {ks[0], ks[-1]}
    if len(ks) >= 4:
        chosen.add(ks[len(ks) // 2])
    return [str(k) for k in sorted(chosen)]


def max_k(report: Report) -> str | None:
    """The largest k every task supports: the one per-task columns can compare."""
    ks = shown_ks(report.summary.pass_at_k)
    return ks[-1] if ks else None


@dataclass(frozen=True)
class Counts:
    passed: int
    failed: int
    errors: int
    unknown: int

    def items(self) -> Iterator[tuple[Verdict, int]]:
        """Pass, fail and error always (a zero is a real count); unknown only when present."""
        yield Verdict.PASS, self.passed
        yield Verdict.FAIL, self.failed
        yield Verdict.ERROR, self.errors
        if self.unknown:
            yield Verdict.UNKNOWN, self.unknown


COUNT_WORDS = {
    Verdict.PASS: "passed",
    Verdict.FAIL: "failed",
    Verdict.ERROR: "errored",
    Verdict.UNKNOWN: "unknown",
}


def task_counts(summary: Summary) -> Counts:
    return Counts(
        summary.passed_tasks, summary.failed_tasks, summary.error_tasks, summary.unknown_tasks
    )


def trial_counts(summary: Summary) -> Counts:
    return Counts(summary.passed, summary.failed, summary.errors, summary.unknown)


def summary_rows(report: Report) -> list[tuple[str, str]]:
    """The figures of the summary table after the task and trial counts, in reading order."""
    s = report.summary
    rows = [("Pass rate (mean over tasks)", rate_with_ci(s.pass_rate, s.pass_rate_ci))]
    for k in shown_ks(s.pass_at_k):
        rows.append((f"pass@{k}", percent(s.pass_at_k.get(k))))
    for k in shown_ks(s.pass_hat_k):
        rows.append((f"pass^{k}", percent(s.pass_hat_k.get(k))))
    if not s.pass_at_k:
        rows.append(("pass@k / pass^k", NA))
    rows += [
        ("Flakiness", _flakiness(s)),
        ("Errors", f"{s.errors} of {s.trials} trials"),
        ("Mean score", number(s.mean_score)),
        ("Latency p50 / p95", f"{seconds(s.latency_p50_s)} / {seconds(s.latency_p95_s)}"),
        ("Tokens", tokens(s.usage, s.grader_usage)),
        ("Cost", total_cost(s.cost_usd, s.grader_cost_usd, s.grader_usage)),
        ("Duration", seconds(s.duration_s)),
    ]
    adaptive = adaptive_note(report)
    if adaptive:
        rows.insert(rows.index(("Errors", f"{s.errors} of {s.trials} trials")), adaptive)
    return rows


def adaptive_note(report: Report) -> tuple[str, str] | None:
    """With `--trials auto`: how many tasks stopped for each reason."""
    policy = report.run.config.get("adaptive")
    if not policy:
        return None
    from trialkit.run.adaptive import CAP, FIRST_FAILURE, NARROW

    reasons = [t.stopped or "" for t in report.tasks]
    counts = [
        (sum(r.startswith(FIRST_FAILURE) for r in reasons), "at a first failure"),
        (sum(r.startswith(NARROW) for r in reasons), "with a narrow enough interval"),
        (sum(r.startswith(CAP) for r in reasons), "at their cap"),
    ]
    parts = [f"{n} {why}" for n, why in counts if n]
    unfinished = sum(not r for r in reasons)
    if unfinished:
        parts.append(f"{unfinished} not finished")
    label = f"Adaptive trials (precision {policy['precision']:g})"
    return label, "tasks stopped: " + ", ".join(parts) if parts else "no task stopped"


def _flakiness(summary: Summary) -> str:
    if summary.flakiness_rate is None:
        return NA
    n = summary.flaky_tasks
    return f"{percent(summary.flakiness_rate)} ({n} flaky task{'' if n == 1 else 's'})"


def pass_k_note(report: Report) -> str | None:
    excluded = report.summary.pass_k_excluded
    if not excluded:
        return None
    return "pass@k and pass^k leave out tasks with no decided trial: " + ", ".join(excluded)


def run_title(report: Report) -> str:
    run = report.run
    who = f"{run.name} ({run.id})" if run.name else run.id
    title = f"{report.suite.id} · {report.suite.kind.value} · run {who}"
    model = run_model(report)
    return f"{title} · model {model}" if model else title


def run_model(report: Report) -> str | None:
    """The model under test, when the run had one (`run.config["model"]`)."""
    model = report.run.config.get("model")
    return str(model) if model else None


def run_subtitle(report: Report) -> str:
    """When the run started and, unless it completed, how it ended."""
    ending = run_ending(report)
    started = run_started(report)
    return started if ending is None else f"{started} · {ending}"


def run_started(report: Report) -> str:
    return f"started {report.run.started_at.isoformat()}"


def run_ending(report: Report) -> str | None:
    """How a run that did not complete ended (a stopped run says why); `None` if it completed."""
    run = report.run
    if run.status == "completed":
        return None
    if run.status == "interrupted":
        return "interrupted: only the trials that finished are counted"
    if run.status == "stopped":
        reason = run.config.get("stop_reason")
        return f"stopped: {reason}" if reason else "stopped"
    return run.status


def kind_label(task: TaskReport) -> str:
    if task.expect == "failure":
        return f"{task.kind.value}, expects failure"
    return task.kind.value


def trials_passed(task: TaskReport) -> str:
    return f"{task.passed}/{task.trials}"


def non_passing_trials(task: TaskReport) -> list[TrialResult]:
    return [r for r in task.results if r.verdict is not Verdict.PASS]


def group_trials(results: list[TrialResult]) -> list[list[TrialResult]]:
    """Trials that went wrong the same way (verdict, error, checks, output), in trial order.

    A task that fails identically on all its trials is then shown once, not n times, which
    keeps a report of a broken suite readable and under CI size limits.
    """
    groups: dict[str, list[TrialResult]] = {}
    for result in results:
        groups.setdefault(_likeness(result), []).append(result)
    return list(groups.values())


def _likeness(result: TrialResult) -> str:
    error = result.error
    return repr(
        (
            result.verdict,
            result.status,
            result.failed,
            None if error is None else (error.type, error.message, error.phase),
            [(s.name, s.verdict, score_reason(s), s.assertions) for s in result.scores],
            result.output,
        )
    )


def trial_label(group: list[TrialResult]) -> str:
    numbers = ", ".join(f"#{r.trial}" for r in group)
    return f"Trial {numbers}" if len(group) == 1 else f"Trials {numbers}"


def group_seconds(group: list[TrialResult]) -> str:
    low = min(r.duration_s for r in group)
    high = max(r.duration_s for r in group)
    return seconds(low) if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f} s"


def non_passing_checks(result: TrialResult) -> list[Score]:
    return [s for s in result.scores if s.verdict is not Verdict.PASS]


def non_passing_assertions(assertions: list[Assertion]) -> list[Assertion]:
    return [a for a in assertions if a.verdict is not Verdict.PASS]


def score_reason(score: Score) -> str | None:
    """The rationale, falling back on the grader's exception for a score that errored."""
    if score.rationale:
        return score.rationale
    if score.error is not None:
        return score.error.summary()
    return None


def error_text(error: ErrorInfo) -> str:
    where = f" (during {error.phase})" if error.phase else ""
    return f"{error.summary()}{where}"


def trial_notes(result: TrialResult) -> list[str]:
    """Facts about a trial that its checks do not say."""
    notes = []
    if result.status is not TrialStatus.COMPLETED:
        notes.append(f"status {result.status.value}")
    if result.failed:
        notes.append("the agent reported failure")
    return notes
