"""`trialkit cache stats|verify|prune DIR`: look after a cassette folder (recorded model calls)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from trialkit.cli._common import EXIT_GATE_FAILED, debug_option, fail, handle_errors, stdout_console
from trialkit.models.cassette import CassetteError
from trialkit.models.cassette_tools import cassette_stats, prune_cassette, verify_cassette

COUNTS = ("files", "recordings", "bytes")
DIR = click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))


@contextmanager
def _cassette_errors() -> Iterator[None]:
    """A cassette that cannot be used is bad usage: one line on stderr, exit 2."""
    try:
        yield
    except CassetteError as exc:
        fail(str(exc))


@click.group("cache")
def cache_command() -> None:
    """Inspect and tidy a cassette folder (the DIR given to `run --cache`)."""


@cache_command.command("stats")
@DIR
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@debug_option
@handle_errors
def stats_command(directory: Path, as_json: bool, debug: bool) -> None:
    """Show what DIR holds: files, recordings and bytes per model; when recorded."""
    with _cassette_errors():
        stats = cassette_stats(directory)
    if as_json:
        click.echo(json.dumps(stats.model_dump(mode="json"), indent=2))
        return
    from trialkit.reports._table import Column, print_table

    columns = [Column("model"), *(Column(c, justify="right") for c in COUNTS)]
    rows = [
        [model, str(per.files), str(per.recordings), f"{per.bytes:,}"]
        for model, per in sorted(stats.models.items())
    ]
    rows.append(["total", str(stats.files), str(stats.recordings), f"{stats.total_bytes:,}"])
    print_table(stdout_console(), columns, rows)
    if stats.oldest and stats.newest:
        click.echo(
            f"recorded between {stats.oldest:%Y-%m-%d %H:%M} and {stats.newest:%Y-%m-%d %H:%M} UTC"
        )
    if stats.invalid_files:
        click.echo(
            f"{stats.invalid_files} file(s) could not be read: `trialkit cache verify {directory}`"
        )


@cache_command.command("verify")
@DIR
@debug_option
@handle_errors
def verify_command(directory: Path, debug: bool) -> None:
    """Check every recording in DIR; print `path: problem` lines, exit 1 if any.

    A recording must be a regular file of at most 256 MiB, readable JSON of this schema
    version, unedited (its key is the hash of its request), with valid responses and no
    secrets. Each captured call's answer must be fit to replay (a stream with its final event,
    fields of their types): one `path: trial T occurrence O: problem` line per one that is not.
    """
    with _cassette_errors():
        problems = verify_cassette(directory)
    for problem in problems:
        click.echo(problem)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {directory}", err=True)
        raise SystemExit(EXIT_GATE_FAILED)
    click.echo(f"{directory}: all recordings are valid")


@cache_command.command("prune")
@DIR
@click.option("--dry-run", is_flag=True, help="Only print what would be removed.")
@debug_option
@handle_errors
def prune_command(directory: Path, dry_run: bool, debug: bool) -> None:
    """Remove recordings the last run with DIR did not use.

    The last run's keys are in DIR/.last-run.json. Run the whole suite with the cassette first
    (e.g. `--cache-mode replay`): a run of a few tasks marks only theirs as used.
    """
    with _cassette_errors():
        removed = prune_cassette(directory, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for path in removed:
        click.echo(f"{verb} {path}")
    click.echo(f"{verb} {len(removed)} recording file(s)")
