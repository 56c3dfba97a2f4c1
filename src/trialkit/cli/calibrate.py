"""`trialkit calibrate --labels FILE`: how well a judge agrees with human labels."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from trialkit.analysis.calibration import DEFAULT_DISAGREEMENTS
from trialkit.cli._common import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    debug_option,
    fail,
    handle_errors,
    open_store,
    resolve_label_runs,
    store_option,
    write_output,
)

if TYPE_CHECKING:
    from trialkit.labels import Label
    from trialkit.store import Store
    from trialkit.trial import Trial


@click.command("calibrate")
@click.option(
    "--labels",
    "labels_path",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Human labels: a .jsonl or .csv file (e.g. from `trialkit labels export`).",
)
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    help="The run of the labels that name none; labels of other runs are left out "
    "[default: each label's own run].",
)
@click.option(
    "--grader",
    metavar="NAME",
    help="The grader (score name) to calibrate [default: the one the labels are for, else "
    "the only judge, else the only grader of the labeled trials].",
)
@click.option(
    "--min-kappa",
    type=click.FloatRange(-1, 1),
    metavar="X",
    help="Fail (exit 1) when Cohen's kappa is under X, or undefined.",
)
@click.option(
    "--max-mae",
    type=click.FloatRange(0, 1),
    metavar="X",
    help="Fail (exit 1) when the mean absolute error is over X, or undefined.",
)
@click.option(
    "--disagreements",
    "shown",
    type=click.IntRange(min=0),
    default=DEFAULT_DISAGREEMENTS,
    show_default=True,
    metavar="N",
    help="How many of the largest disagreements to list.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also write the calibration as JSON to FILE.",
)
@store_option
@debug_option
@handle_errors
def calibrate_command(
    labels_path: str,
    run_ref: str | None,
    grader: str | None,
    min_kappa: float | None,
    max_mae: float | None,
    shown: int,
    json_path: str | None,
    store_url: str | None,
    debug: bool,
) -> None:
    """Compare a judge's scores with human labels on the same trials.

    Prints the Spearman and Pearson correlations, the mean absolute error, the pass/fail
    agreement rate and Cohen's kappa, the confusion matrix, and the largest disagreements
    with the command that shows each transcript. Labels or scores without a verdict (unknown,
    error) are left out and counted; a figure that cannot be computed is shown as undefined.

    Exit codes: 0 done (and the gates passed); 1 a gate failed, or its figure is undefined;
    2 bad usage, or a bad labels file (each problem as file:line: field: message).
    """
    from trialkit.analysis import CalibrationError, calibrate, choose_grader
    from trialkit.labels import LabelsError, read_labels

    try:
        labels = read_labels(labels_path)
    except LabelsError as exc:
        fail(str(exc))
    if not labels:
        fail(f"{labels_path}: no labels in the file")
    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref) if run_ref is not None else None
        labels = resolve_label_runs(store, labels_path, labels, run_id, strict=False)
        trials = _labeled_trials(store, labels, run_id)
    try:
        chosen = grader or choose_grader(labels, trials)
        calibration = calibrate(labels, trials, grader=chosen, run_id=run_id, disagreements=shown)
    except (CalibrationError, ImportError) as exc:
        fail(str(exc))
    click.echo(calibration.to_text(), nl=False)
    if json_path is not None:
        write_output(json_path, calibration.to_json(), "the calibration")
    reasons = calibration.gate(min_kappa=min_kappa, max_mae=max_mae)
    for reason in reasons:
        click.echo(f"gate failed: {reason}", err=True)
    sys.exit(EXIT_GATE_FAILED if reasons else EXIT_OK)


def _labeled_trials(store: Store, labels: list[Label], run_id: str | None) -> list[Trial]:
    """The stored trials the labels name (one query each: labels are few, runs may be big)."""
    from trialkit.store import TrialNotFound

    keys: set[tuple[str, str, int]] = set()
    for label in labels:
        run = label.run_id or run_id
        if run is not None and run_id in (None, run):
            keys.add((run, label.task_id, label.trial))
    trials = []
    for run, task_id, index in sorted(keys):
        try:
            trials.append(store.load_trial(run, task_id, index))
        except TrialNotFound:
            continue
    return trials
