"""What a test item's trials mean for pytest: an error, a failure or a pass, and what to show.

A task whose trials errored is a pytest *error* (no verdict was possible), a regression task
that did not pass every trial a *failure*; a capability task passes (reporting its pass@k and
pass^k), and fails only with `--trialkit-strict-capability` when no trial passed.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialkit.report import Report, TaskReport, TrialResult

MAX_SHOWN = 300
"""Characters of a reason or an output shown per trial."""


class TrialkitOutcome(Exception):
    """Shown as its message, without a traceback."""

    __module__ = "trialkit"


class TrialsErrored(TrialkitOutcome):
    """Trials of the task errored: raised in the item's setup, so pytest counts an error."""


class TaskFailed(TrialkitOutcome):
    """The task did not pass its gate: raised in the item's call, so pytest counts a failure."""


def errored(report: TaskReport, suite_id: str) -> str | None:
    """Why the item is an error (some trials errored, or none ran), or None."""
    if report.trials == 0:
        return f"task {report.id!r} of suite {suite_id!r}: no trial ran"
    if report.errors == 0:
        return None
    return _explain(
        report, suite_id, f"{report.errors} of {report.trials} trials errored (no verdict)"
    )


def judge(report: TaskReport, suite_id: str, *, strict_capability: bool) -> str | None:
    """Why the item fails by its suite's gate, or None when it passes."""
    from trialkit.score import Verdict
    from trialkit.task import SuiteKind

    if report.kind is SuiteKind.REGRESSION:
        if report.verdict is Verdict.PASS:
            return None
        not_passed = report.trials - report.passed
        why = f"regression task: {not_passed} of {report.trials} trials did not pass"
        return _explain(report, suite_id, why)
    if strict_capability and report.verdict is not Verdict.PASS:
        why = f"capability task: none of its {report.trials} trials passed"
        return _explain(report, suite_id, f"{why} (--trialkit-strict-capability)")
    return None


def _explain(report: TaskReport, suite_id: str, why: str) -> str:
    where = f"task {report.id!r} of suite {suite_id!r}"
    lines = [f"{where}: {why}", f"  {figures(report)}"]
    lines += [f"  trial {r.trial}: {_trial_line(r)}" for r in report.results]
    if report.results_omitted:
        lines.append(f"  ({report.results_omitted} more trials not shown)")
    return "\n".join(lines)


def _trial_line(result: TrialResult) -> str:
    from trialkit.score import Verdict

    verdict = result.verdict.value
    if result.error is not None:
        return f"{verdict}: {result.error.type}: {_cut(result.error.message)}"
    reasons = [
        f"{score.name or 'grader'}: {_cut(score.rationale or score.verdict.value)}"
        for score in result.scores
        if score.verdict is not Verdict.PASS
    ]
    if not reasons:
        return verdict
    shown = "" if result.output is None else f" (output: {_cut(repr(result.output), 120)})"
    return f"{verdict}: {'; '.join(reasons)}{shown}"


def _cut(text: str, limit: int = MAX_SHOWN) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def figures(report: TaskReport | Any) -> str:
    """`3/4 trials passed, pass@1 0.75, pass@4 1.00, pass^4 0.00, 0 errors` for a task."""
    decided = report.passed + report.failed
    parts = [f"{report.passed}/{report.trials} trials passed"]
    parts += _pass_k(report.pass_at_k, report.pass_hat_k)
    if decided != report.trials:
        parts.append(f"{report.errors} errored")
    return ", ".join(parts)


def _pass_k(at: dict[str, float], hat: dict[str, float]) -> list[str]:
    if not at:
        return []
    top = max(at, key=int)
    shown = [f"pass@1 {at['1']:.2f}"] if "1" in at else []
    if top != "1":
        shown.append(f"pass@{top} {at[top]:.2f}")
    if top in hat:
        shown.append(f"pass^{top} {hat[top]:.2f}")
    return shown


def properties(report: TaskReport, run_id: str | None) -> list[tuple[str, object]]:
    """The item's JUnit properties: trial counts, pass@k and pass^k per k, the run's id."""
    found: list[tuple[str, object]] = [
        ("trialkit_run", run_id or ""),
        ("trialkit_kind", report.kind.value),
        ("trialkit_verdict", report.verdict.value),
        ("trialkit_trials", report.trials),
        ("trialkit_passed", report.passed),
        ("trialkit_failed", report.failed),
        ("trialkit_errors", report.errors),
    ]
    found += [(f"trialkit_pass_at_{k}", round(v, 6)) for k, v in report.pass_at_k.items()]
    found += [(f"trialkit_pass_hat_{k}", round(v, 6)) for k, v in report.pass_hat_k.items()]
    return found


def summary_lines(
    report: Report, store: str | None, *, per_task: bool, note: str = ""
) -> list[str]:
    """A suite's lines in the terminal summary: its run, figures and how to see it."""
    s = report.summary
    run = report.run
    rate = "n/a" if s.pass_rate is None else f"{s.pass_rate:.1%}"
    if s.pass_rate_ci is not None:
        low, high = s.pass_rate_ci
        rate += f" (95% CI {low:.1%}-{high:.1%})"
    cost = "n/a" if s.cost_usd is None else f"${s.cost_usd:.4f}"
    errors = f"{s.errors} {'error' if s.errors == 1 else 'errors'}"
    head = f"suite {report.suite.id} ({report.suite.kind.value}), run {run.id}"
    if run.status != "completed":
        head += f" [{run.status}]"
    figures_line = ", ".join(
        [
            f"{s.passed_tasks}/{s.tasks} tasks passed",
            f"pass rate {rate} over {s.trials} trials",
            *_pass_k(s.pass_at_k, s.pass_hat_k),
            errors,
            f"cost {cost}",
        ]
    )
    lines = [head + note, f"  {figures_line}"]
    if per_task:
        lines += [
            f"    {t.id} ({t.kind.value}): {t.verdict.value}, {figures(t)}" for t in report.tasks
        ]
    if store is None:
        lines.append("  not stored (--trialkit-store none)")
    else:
        lines.append(f"  see it: {shlex.join(['trialkit', 'report', run.id, '--store', store])}")
    return lines
