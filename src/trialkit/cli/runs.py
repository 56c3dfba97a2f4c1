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
    table.add_column("run", no_wrap=True)
    table.add_column("name", overflow="fold")
    table.add_column("suite", no_wrap=True)
    table.add_column("started", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for column in ("trials", "pass", "fail", "error", "rate"):
        table.add_column(column, justify="right", no_wrap=True)
    for r in runs:
        rate = "n/a" if r.pass_rate is None else f"{r.pass_rate:.0%}"
        table.add_row(
            r.id,
            r.name or "",
            f"{r.suite_id} ({r.suite_kind})",
            r.started_at.strftime("%Y-%m-%d %H:%M"),
            r.status,
            str(r.trials),
            str(r.passed),
            str(r.failed),
            str(r.errors),
            rate,
        )
    stdout_console().print(table)
