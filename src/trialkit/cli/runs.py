"""`trialkit runs`: list the stored runs, newest first."""

from __future__ import annotations

import json

import click
from rich.table import Table

from trialkit.cli._common import (
    debug_option,
    handle_errors,
    open_store,
    stdout_console,
    store_option,
)


@click.command("runs")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Show at most this many runs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@store_option
@debug_option
@handle_errors
def runs_command(limit: int, as_json: bool, store_url: str | None, debug: bool) -> None:
    """List stored runs (RUN elsewhere: an id, a unique id prefix, or a run name)."""
    with open_store(store_url) as store:
        runs = store.list_runs(limit=limit)
    if as_json:
        click.echo(json.dumps([r.model_dump(mode="json") for r in runs], indent=2))
        return
    if not runs:
        click.echo("no runs yet: `trialkit run TARGET` makes one")
        return
    table = Table(box=None, pad_edge=False)
    for column in (
        "run",
        "name",
        "suite",
        "kind",
        "started",
        "status",
        "tasks",
        "trials",
        "pass",
        "fail",
        "error",
        "pass rate",
    ):
        table.add_column(column, justify="right" if column in _NUMERIC else "left")
    for r in runs:
        rate = "n/a" if r.pass_rate is None else f"{r.pass_rate:.1%}"
        table.add_row(
            r.id,
            r.name or "",
            r.suite_id,
            str(r.suite_kind),
            r.started_at.strftime("%Y-%m-%d %H:%M:%S"),
            r.status,
            str(r.tasks),
            str(r.trials),
            str(r.passed),
            str(r.failed),
            str(r.errors),
            rate,
        )
    stdout_console().print(table)


_NUMERIC = {"tasks", "trials", "pass", "fail", "error", "pass rate"}
