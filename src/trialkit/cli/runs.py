"""`trialkit runs`: list the stored runs, newest first."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from trialkit.cli._common import (
    debug_option,
    handle_errors,
    open_store,
    stdout_console,
    store_option,
)

if TYPE_CHECKING:
    from trialkit.store import RunSummary


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
    _print_runs(runs)


def _print_runs(runs: list[RunSummary]) -> None:
    from trialkit.reports._table import Column, print_table

    columns = [
        Column("run"),
        Column("name", fit="fold", drop=3),
        Column("suite", drop=2),
        Column("kind", drop=8),
        Column("started", fit="words", drop=6),
        Column("status", drop=4),
        Column("trials", justify="right", drop=5),
        Column("pass", justify="right", drop=7),
        Column("fail", justify="right", drop=7),
        Column("error", justify="right", drop=7),
        Column("rate", justify="right", drop=1),
    ]  # on a narrow terminal the rate and the suite stay longest; the counts go together
    rows = [
        [
            r.id,
            r.name or "",
            r.suite_id,
            r.suite_kind,
            r.started_at.strftime("%Y-%m-%d %H:%M"),
            r.status,
            str(r.trials),
            str(r.passed),
            str(r.failed),
            str(r.errors),
            "n/a" if r.pass_rate is None else f"{r.pass_rate:.0%}",
        ]
        for r in runs
    ]
    print_table(stdout_console(), columns, rows)
