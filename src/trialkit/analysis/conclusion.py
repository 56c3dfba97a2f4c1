"""A paired comparison's conclusions in plain sentences, one for each question.

`conclusion` answers the gate's question ("did the agent change on these tasks?") and agrees
with the exit code by construction: it reads the same `outcome`. It names the tasks that
changed verdict, the tasks whose own change is significant, and every task left out of the
test with the reason, so no failing task can vanish from it. `suite_conclusion` answers "is
it better or worse at tasks like these?", and says when the tasks are too few to tell.
"""

from __future__ import annotations

from trialkit.analysis._significance import confidence_text
from trialkit.analysis.paired import PairedComparison, TrialTest, significant_tasks
from trialkit.analysis.planning import fewest_tasks, smallest_p

MAX_NAMED = 10
"""A sentence names this many tasks, then says how many more."""


def concluded(pair: PairedComparison) -> PairedComparison:
    """`pair` with its `conclusion` and `suite_conclusion` written."""
    return pair.model_copy(
        update={"conclusion": conclusion(pair), "suite_conclusion": suite_conclusion(pair)}
    )


def points(value: float, *, unit: str = " pts") -> str:
    """A difference of rates in percentage points, signed: `+4.0 pts`, `−12.5 pts`, `0.0 pts`."""
    shown = f"{abs(value) * 100:.1f}"
    if float(shown) == 0:
        return f"0.0{unit}"
    return f"{'+' if value > 0 else '−'}{shown}{unit}"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    more = len(names) - MAX_NAMED
    return shown + (f" and {more} more" if more > 0 else "")


def p_text(p: float) -> str:
    return "p < 1e-15" if p < 1e-15 else f"p = {p:.3g}"


def gate_sentence(pair: PairedComparison) -> str:
    """The first sentence of `conclusion`: the outcome of the exact stratified test."""
    a, b = pair.baseline, pair.candidate
    test = pair.trial_test
    level = confidence_text(pair.confidence)
    if test is None:
        return f"No task has decided trials in both {a} and {b}: there is nothing to compare."
    if not test.informative_tasks:
        return (
            f"No change from {a} to {b} on these tasks: on each of the "
            f"{plural(test.tasks, 'task')} decided in both, the trials passed in both runs or "
            "failed in both."
        )
    evidence = (
        f"{test.passed_b} of {b}'s trials passed where {test.expected_b:.1f} were expected if "
        f"nothing changed ({'exact ' if test.exact else ''}stratified test over "
        f"{plural(test.informative_tasks, 'task')}"
        f"{'' if test.exact else ', normal approximation'}, "
        f"{p_text(test.p_value)})"
    )
    direction = {"worse": -1, "better": 1}.get(pair.outcome)
    if direction is not None:
        word = pair.outcome
        alone = significant_tasks(test, direction)
        named = [f"{t.id} ({t.passed_a}/{t.decided_a} → {t.passed_b}/{t.decided_b})" for t in alone]
        tested = plural(len(test.task_tests), "task")
        alone_text = (
            f"{listed(named)} {'is' if len(alone) == 1 else 'are'} {word} on "
            f"{'its' if len(alone) == 1 else 'their'} own (Fisher's exact test, Holm-adjusted "
            f"over {tested})"
        )
        if test.p_value < 1 - pair.confidence and alone:
            return (
                f"{b} is {word} than {a} on these tasks: {evidence}, and {alone_text}: "
                f"significant at {level}."
            )
        if alone:
            return (
                f"{b} is {word} than {a} on these tasks: {alone_text}: significant at {level}; "
                f"over all tasks, {evidence}."
            )
        return f"{b} is {word} than {a} on these tasks: {evidence}: significant at {level}."
    could = ""
    if test.detectable is not None:
        could = (
            f"; it could detect a change of {test.detectable * 100:.0f} pts on every task "
            "at 80% power"
        )
    return f"No significant change from {a} to {b} on these tasks: {evidence}{could}."


def verdict_sentence(pair: PairedComparison) -> str:
    """Which tasks changed verdict, and which changed on their own (Fisher, Holm)."""
    parts = []
    failing, fixed = pair.new_failures, pair.fixed
    if failing or fixed:
        moved = []
        if failing:
            moved.append(f"{plural(len(failing), 'new failure')} ({listed(failing)})")
        if fixed:
            moved.append(f"{len(fixed)} fixed ({listed(fixed)})")
        parts.append("Verdicts: " + ", ".join(moved))
    elif pair.decided_tasks:
        parts.append(
            f"No task changed verdict among the {plural(pair.decided_tasks, 'task')} decided "
            "in both runs"
        )
    test = pair.trial_test
    if test is not None and test.task_tests:
        significant = [t for t in test.task_tests if t.significant]
        tested = plural(len(test.task_tests), "task")
        if significant:
            named = [
                f"{t.id} ({t.passed_a}/{t.decided_a} → {t.passed_b}/{t.decided_b})"
                for t in significant
            ]
            parts.append(
                f"changed on their own (Fisher's exact test, Holm-adjusted over {tested}): "
                + listed(named)
            )
        else:
            parts.append(
                f"no single task changed significantly on its own (Fisher's exact test, "
                f"Holm-adjusted over {tested})"
            )
    return "; ".join(parts) + "." if parts else ""


def left_out_sentence(pair: PairedComparison) -> str:
    if not pair.left_out:
        return ""
    named = [f"{t.id} ({t.reason})" for t in pair.left_out]
    return f"Not compared: {listed(named)}."


def conclusion(pair: PairedComparison) -> str:
    """The gate's outcome, the tasks that changed, and the tasks left out of the test."""
    sentences = [gate_sentence(pair), left_out_sentence(pair), verdict_sentence(pair)]
    return " ".join(s for s in sentences if s)


def suite_conclusion(pair: PairedComparison) -> str:
    """The answer for tasks like these: the mean difference over tasks, its interval and the
    sign-flip test, or why the tasks are too few."""
    test = pair.task_test
    if test is None or pair.difference is None:
        return "For tasks like these: no task has decided trials in both runs."
    level = confidence_text(pair.confidence)
    rates = f"{_percent(pair.pass_rate_baseline)} → {_percent(pair.pass_rate_candidate)}"
    interval = ""
    if pair.difference_ci is not None:
        low, high = pair.difference_ci
        interval = f"{level} CI {points(low, unit='')} to {points(high)}; "
    figures = (
        f"the mean task pass rate goes {rates}, {points(pair.difference)} over "
        f"{plural(test.tasks, 'task')} ({interval}sign-flip test {p_text(test.sign_flip_p_value)})"
    )
    if pair.suite_outcome == "too_few_tasks":
        alpha = f"{1 - pair.confidence:.2g}"
        smallest = f"2/2^{test.changed_tasks} = {test.smallest_p:.3g}"
        if test.tasks < fewest_tasks(pair.confidence):
            smallest = f"2/2^{test.tasks} = {smallest_p(test.tasks):.3g}"
            why = (
                f"with {plural(test.tasks, 'task')} no test over tasks can reach p < {alpha} "
                f"(the smallest possible is {smallest})"
            )
        else:
            why = (
                f"only {test.changed_tasks} of the {test.tasks} tasks changed pass rate, and no "
                f"test over them can reach p < {alpha} (the smallest possible is {smallest})"
            )
        return (
            f"For tasks like these: {figures}: too few tasks to tell: {why}; it takes at least "
            f"{fewest_tasks(pair.confidence)} tasks that change."
        )
    if pair.suite_outcome in ("worse", "better"):
        return f"For tasks like these: {figures}: {pair.suite_outcome}, significant at {level}."
    could = ""
    if test.detectable is not None:
        could = f"; it could detect a mean change of {test.detectable * 100:.0f} pts at 80% power"
    if not test.changed_tasks:
        return f"For tasks like these: {figures}: no task's pass rate changed{could}."
    return f"For tasks like these: {figures}: not significant at {level}{could}."


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def detectable_text(test: TrialTest | None) -> str:
    if test is None or test.detectable is None:
        return "—"
    return f"{test.detectable * 100:.1f} pts on every task (80% power)"
