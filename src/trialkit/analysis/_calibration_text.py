"""A calibration as a few lines of plain text: the figures, the confusion matrix, and the
largest disagreements with the command that shows each transcript."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trialkit.analysis.calibration import Calibration, Excluded, Statistic

_EXCLUSIONS = {
    "other_grader": "for another grader",
    "other_run": "for another run",
    "not_stored": "trial not stored",
    "not_graded": "not graded",
    "relabeled": "score replaced by a label",
    "judge_error": "judge error",
    "judge_unknown": "judge said unknown",
    "human_unknown": "human said unknown",
}


def render_calibration(calibration: Calibration) -> str:
    c = calibration
    runs = ", ".join(c.runs) if c.runs else "none matched"
    lines = [
        f"grader {c.grader!r} against human labels · {'run' if len(c.runs) == 1 else 'runs'} "
        f"{runs}",
        f"{c.labels} label{'' if c.labels == 1 else 's'}: {c.pairs} compared"
        + _left_out(c.excluded),
        "",
        _row("spearman", _figure(c.spearman)),
        _row("pearson", _figure(c.pearson)),
        _row("mean abs error", _figure(c.mae)),
        _row("agreement", _rate(c.agreement)),
        _row("Cohen's kappa", _figure(c.kappa)),
        "",
    ]
    m = c.confusion
    lines += [
        f"  {'':<12}{'judge pass':>12}{'judge fail':>12}",
        f"  {'human pass':<12}{m.human_pass_judge_pass:>12}{m.human_pass_judge_fail:>12}",
        f"  {'human fail':<12}{m.human_fail_judge_pass:>12}{m.human_fail_judge_fail:>12}",
    ]
    for item in c.consistency:
        lines += ["", f"consistency: {item.line()}"]
    if c.disagreements:
        lines += ["", "largest disagreements (|judge − human|):"]
        lines += [
            f"  {d.difference:.2f}  judge {d.judge_score:.2f} {d.judge_verdict}, "
            f"human {d.human_score:.2f} {d.human_verdict}  {d.command}"
            for d in c.disagreements
        ]
    return "\n".join(lines) + "\n"


def _left_out(excluded: Excluded) -> str:
    counts = excluded.model_dump()
    parts = [f"{n} {_EXCLUSIONS[reason]}" for reason, n in counts.items() if n]
    return f", {excluded.total} left out ({', '.join(parts)})" if parts else ""


def _row(name: str, text: str) -> str:
    return f"  {name:<16}{text}"


def _figure(statistic: Statistic) -> str:
    if statistic.value is None:
        return f"undefined: {statistic.reason}"
    return f"{statistic.value:.3f}"


def _rate(statistic: Statistic) -> str:
    if statistic.value is None:
        return f"undefined: {statistic.reason}"
    text = f"{statistic.value:.1%}"
    if statistic.ci is not None:
        low, high = statistic.ci
        text += f"  (95% CI {low:.1%}–{high:.1%})"
    return text
