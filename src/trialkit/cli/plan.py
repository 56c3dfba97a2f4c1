"""`trialkit plan RUN --detect 0.10`: the tasks and trials a comparison needs."""

from __future__ import annotations

import click

from trialkit.cli._common import (
    debug_option,
    fail,
    format_options,
    handle_errors,
    open_store,
    show,
    store_option,
)


def _share(value: str) -> float:
    """`0.10` or `10%` as 0.10."""
    text = value.strip()
    try:
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a share such as 0.10 or 10%") from None
    if not 0 < number <= 1:
        raise click.BadParameter(f"{value!r} must lie in (0, 1] (0.10 or 10%)")
    return number


@click.command("plan")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--detect",
    required=True,
    metavar="CHANGE",
    help="The drop (or rise) of pass rate to detect, as a share: 0.10 or 10% (10 points).",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence of the comparison (its α is 1 − this).",
)
@click.option(
    "--power",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.8,
    show_default=True,
    help="The chance of detecting the change when it is there.",
)
@click.option(
    "--spread",
    metavar="CHANGE",
    default=None,
    help="For tasks like these: how much the change varies from task to task (sd, as a share); "
    "default: as much as --detect.",
)
@format_options("table", "json")
@store_option
@debug_option
@handle_errors
def plan_command(
    run_ref: str,
    detect: str,
    confidence: float,
    power: float,
    spread: str | None,
    fmt: str,
    output: str | None,
    store_url: str | None,
    debug: bool,
) -> None:
    """How many tasks and trials a comparison needs to detect a change of pass rate.

    From the stored run RUN (its tasks' pass rates and trials), as if a later run of the same
    tasks were compared with it (docs/statistics.md). Two questions:

    These tasks (the gate, `compare --fail-on-regression`): the smallest drop of every task's
    pass rate the comparison could detect now, and the trials a task it needs with these tasks.

    Tasks like these: the tasks needed, for each count of trials a task; never fewer than 6 at
    95% (with 5, no test over tasks can reach p < 0.05).
    """
    from trialkit.analysis.planning import plan_comparison

    change = _share(detect)
    spread_value = None if spread is None else _share(spread)
    with open_store(store_url) as store:
        try:
            report = store.load_report(store.resolve_run(run_ref), max_results=0)
        except LookupError as exc:
            fail(str(exc))
    counts = [(t.passed, t.decided) for t in report.tasks if t.decided]
    if not counts:
        fail(f"run {report.run.id} has no task with a decided trial to plan from")
    plan = plan_comparison(counts, change, confidence=confidence, power=power, spread=spread_value)
    if fmt == "json":
        show(output, text=plan.model_dump_json(indent=2) + "\n")
        return
    show(output, text=render_plan(plan, report.run.id))


def render_plan(plan: object, run_id: str) -> str:
    from trialkit.analysis.planning import Plan

    assert isinstance(plan, Plan)
    pts = f"{plan.detect * 100:g} pts"
    level = f"{plan.confidence * 100:g}%"
    now = "n/a" if plan.detectable_now is None else f"{plan.detectable_now * 100:.1f} pts"
    lines = [
        f"trialkit plan · run {run_id}: {plan.tasks} tasks with decided trials, "
        f"{plan.trials} trials a task, mean p(1 − p) {plan.pass_rate_variance:.3f}",
        f"To detect a change of {pts} at {level} confidence with {plan.power:.0%} power:",
        "",
        "These tasks (the gate: did the agent change on these tasks?)",
        f"  Comparing two runs like this one, it detects a drop of {now} on every task.",
        f"  With these {plan.tasks} tasks, {plan.trials_needed} trials a task in each run "
        f"detect {pts}.",
        "",
        "Tasks like these (is it better or worse at tasks like these?), assuming the change "
        f"varies by {plan.spread * 100:g} pts from task to task:",
        "",
        f"  {'Trials a task':>13}  {'Tasks (these tasks)':>19}  {'Tasks (tasks like these)':>24}",
    ]
    for row in plan.rows:
        lines.append(
            f"  {row.trials:>13}  {row.tasks_for_these_tasks:>19,}  "
            f"{row.tasks_for_tasks_like_these:>24,}"
        )
    lines += [
        "",
        "Normal approximations, good to a few points; the tests themselves are exact.",
    ]
    return "\n".join(lines) + "\n"
