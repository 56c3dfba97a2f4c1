"""`trialkit labels export|import`: human labels to and from JSONL or CSV files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from trialkit.cli._common import (
    debug_option,
    fail,
    handle_errors,
    open_store,
    resolve_label_runs,
    store_option,
)

if TYPE_CHECKING:
    from trialkit.labels import Label

_FILE_HELP = "a .jsonl or .csv file"


@click.group("labels")
def labels_command() -> None:
    """Export a run's labels (or its pending reviews) to a file, or import labels from one."""


@labels_command.command("export", short_help="Write a run's labels, or its pending reviews.")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help=f"Where to write them: {_FILE_HELP}.",
)
@click.option(
    "--pending",
    is_flag=True,
    help="Write the reviews still to do instead, as rows to fill in (verdict unknown).",
)
@store_option
@debug_option
@handle_errors
def export_command(
    run_ref: str, output: str, pending: bool, store_url: str | None, debug: bool
) -> None:
    """Write the labels of RUN (an id, a unique id prefix or a run name) to FILE, one per
    trial and grader, with their reviewer, time and comment.

    With --pending, write a row for each score still waiting for a reviewer instead: fill in
    verdict (pass, fail or unknown), and optionally score, reviewer and comment, then
    `trialkit labels import FILE`. A row left as exported is skipped on import.
    """
    from trialkit.labels import Label, write_labels

    _check_suffix(output)
    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref)
        if pending:
            labels = [
                Label(
                    run_id=run_id,
                    task_id=item.task_id,
                    trial=item.trial,
                    grader=item.grader,
                    verdict="unknown",
                )
                for item in store.pending_reviews(run_id)
            ]
        else:
            labels = store.labels(run_id)
    try:
        write_labels(labels, output)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    what = _count(len(labels), "pending review" if pending else "label")
    click.echo(f"wrote {what} of run {run_id} to {output}")


@labels_command.command("import", short_help="Apply the labels of a file to their trials.")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    help="The run of the labels that name none (an id, a unique id prefix or a run name).",
)
@store_option
@debug_option
@handle_errors
def import_command(path: str, run_ref: str | None, store_url: str | None, debug: bool) -> None:
    """Apply the labels in FILE (.jsonl or .csv) to their trials, so reports count them.

    A label replaces the one stored for the same run, task, trial and grader. The file is
    checked whole first, and applied in one transaction: a bad row or a label for a trial or
    grader the run does not have changes nothing. Rows left as `labels export --pending`
    wrote them (verdict unknown, nothing else filled in) are skipped.
    """
    from trialkit.labels import LabelsError, read_labels
    from trialkit.store import StoreError

    try:
        labels = read_labels(path)
    except LabelsError as exc:
        fail(str(exc))
    answered = [label for label in labels if not _left_as_exported(label)]
    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref) if run_ref is not None else None
        chosen = resolve_label_runs(store, path, answered, run_id, strict=True)
        try:
            saved = store.save_labels(chosen)
        except StoreError as exc:
            fail(f"{path}: {exc}; nothing was imported")
        runs = sorted({label.run_id for label in chosen if label.run_id is not None})
        left = sum(len(store.pending_reviews(run_id)) for run_id in runs)
    skipped = len(labels) - len(answered)
    note = f" ({skipped} left as exported: skipped)" if skipped else ""
    if not saved:
        click.echo(f"nothing to import from {path}{note}")
        return
    where = f"run {runs[0]}" if len(runs) == 1 else f"{len(runs)} runs"
    click.echo(
        f"imported {_count(saved, 'label')} into {where}{note}; "
        f"{_count(left, 'review')} still pending"
    )


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _check_suffix(path: str) -> None:
    if Path(path).suffix.lower() not in (".jsonl", ".csv"):
        fail(f"{path}: a labels file ends in .jsonl or .csv")


def _left_as_exported(label: Label) -> bool:
    """A row of `export --pending` that nobody filled in: not an answer."""
    filled = (label.score, label.reviewer, label.labeled_at, label.comment)
    return label.verdict == "unknown" and all(value is None for value in filled)
