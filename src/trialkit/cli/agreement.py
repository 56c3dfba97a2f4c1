"""`trialkit agreement RUN`: how much several judges (and humans) agree on a run's trials."""

from __future__ import annotations

import sys
from typing import cast

import click

from trialkit.cli._common import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    debug_option,
    fail,
    handle_errors,
    open_store,
    store_option,
)


@click.command("agreement")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--grader",
    "graders",
    multiple=True,
    metavar="NAME",
    help="A rater: a score name, or a judge inside a majority/mean (repeatable) [default: the "
    "judges of the run's first combined judge score, else every judge score].",
)
@click.option(
    "--labels",
    "labels_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Human labels (.jsonl or .csv) to count as raters too.",
)
@click.option(
    "--level",
    type=click.Choice(["nominal", "interval"]),
    default="nominal",
    show_default=True,
    help="nominal: compare pass/fail verdicts; interval: compare scores.",
)
@click.option(
    "--min-alpha",
    type=click.FloatRange(-1, 1),
    metavar="X",
    help="Fail (exit 1) when Krippendorff's alpha is under X, or undefined.",
)
@store_option
@debug_option
@handle_errors
def agreement_command(
    run_ref: str,
    graders: tuple[str, ...],
    labels_path: str | None,
    level: str,
    min_alpha: float | None,
    store_url: str | None,
    debug: bool,
) -> None:
    """Krippendorff's alpha of the judges of run RUN over its trials.

    Each judge (and each labeller, with --labels) is a rater and each trial a unit; errors,
    unknowns and missing values are left out of the pairs. Alpha is 1 for perfect agreement
    and 0 for agreement at chance; it is undefined when no trial has two ratings or every
    rating is the same.

    Exit codes: 0 done (and the gate passed); 1 alpha is under --min-alpha, or undefined;
    2 bad usage, or a bad labels file.
    """
    from trialkit.analysis.agreement import Level, default_raters, judge_agreement
    from trialkit.labels import LabelsError, read_labels

    labels = []
    if labels_path is not None:
        try:
            labels = read_labels(labels_path)
        except LabelsError as exc:
            fail(str(exc))
    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref)
        trials = list(store.iter_trials(run_id))
    raters = list(graders) or default_raters(trials)
    if len(raters) + (1 if labels else 0) < 2:
        fail(
            f"run {run_id}: agreement needs at least two raters; found "
            f"{', '.join(raters) or 'no judge scores'}: name them with --grader"
        )
    try:
        result = judge_agreement(trials, raters, labels=labels, level=cast(Level, level))
    except ImportError as exc:
        fail(str(exc))
    click.echo(f"Krippendorff's alpha ({result.level}) · run {run_id}")
    for rater in result.raters:
        click.echo(f"  rater  {rater}")
    shown = "undefined" if result.alpha is None else f"{result.alpha:.3f}"
    why = f" ({result.reason})" if result.reason else ""
    click.echo(f"  alpha  {shown}{why}")
    click.echo(
        f"  over {result.units} trials with at least two ratings ({result.values} ratings); "
        f"{result.units_left_out} left out"
    )
    failed = min_alpha is not None and (result.alpha is None or result.alpha < min_alpha)
    if failed:
        click.echo(f"gate failed: alpha {shown} is under --min-alpha {min_alpha:g}", err=True)
    sys.exit(EXIT_GATE_FAILED if failed else EXIT_OK)
