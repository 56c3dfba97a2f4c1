"""`trialkit health`: which tasks of a suite are saturated, broken or flaky, over its last runs."""

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


@click.command("health")
@click.option(
    "--suite",
    "suite_id",
    metavar="ID",
    help="The suite to assess [default: the suite of the latest run].",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    metavar="N",
    help="Look at the suite's last N runs.",
)
@click.option(
    "--max-judge-flips",
    type=click.FloatRange(0, 1),
    default=0.1,  # analysis.health.DEFAULT_MAX_JUDGE_FLIPS, not imported at startup
    show_default=True,
    metavar="SHARE",
    help="Flag a judge asked several times on each output (repeats) whose verdicts flip on "
    "more than this share of the outputs.",
)
@format_options("table", "md", "json")
@store_option
@debug_option
@handle_errors
def health_command(
    suite_id: str | None,
    last: int,
    max_judge_flips: float,
    fmt: str,
    output: str | None,
    store_url: str | None,
    debug: bool,
) -> None:
    """Assess a suite's tasks over its last runs, whatever model ran them.

    Saturated: passed every trial in at least 2 runs (a capability task is then a candidate
    for the regression suite). Broken: never passed, or a grader errored on half its trials or
    more (the evidence is listed). Flaky: its trials disagreed in some run. Trend: the slope of
    its pass rate over the runs. For the suite: the share of saturated tasks and whether the
    suite still tells apart the models it has seen. Judges asked several times on each output
    (repeats): how often their verdicts flipped, flagged over --max-judge-flips.
    """
    from trialkit.analysis.health import HealthError, suite_health

    with open_store(store_url) as store:
        try:
            health = suite_health(store, suite_id, last=last, max_judge_flips=max_judge_flips)
        except (HealthError, ImportError) as exc:
            fail(str(exc))
    if fmt == "table":
        from trialkit.reports.health import render_health_terminal

        show(output, draw=lambda console: render_health_terminal(health, console), width=120)
    else:
        show(output, text=health.to_markdown() if fmt == "md" else health.to_json())
