"""The `trialkit` command: a group of thin commands over the library."""

from __future__ import annotations

import click

from trialkit._version import __version__
from trialkit.cli.agreement import agreement_command
from trialkit.cli.cache import cache_command
from trialkit.cli.calibrate import calibrate_command
from trialkit.cli.compare import compare_command
from trialkit.cli.export import export_command
from trialkit.cli.health import health_command
from trialkit.cli.labels import labels_command
from trialkit.cli.report import report_command
from trialkit.cli.review import review_command
from trialkit.cli.run import run_command
from trialkit.cli.runs import runs_command
from trialkit.cli.transcripts import transcripts_command
from trialkit.cli.validate import validate_command
from trialkit.cli.view import view_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="trialkit")
def cli() -> None:
    """trialkit: run tasks against your agent several times, grade what it did, gate CI."""


cli.add_command(run_command)
cli.add_command(runs_command)
cli.add_command(report_command)
cli.add_command(review_command)
cli.add_command(labels_command)
cli.add_command(calibrate_command)
cli.add_command(agreement_command)
cli.add_command(compare_command)
cli.add_command(health_command)
cli.add_command(cache_command)
cli.add_command(transcripts_command)
cli.add_command(export_command)
cli.add_command(validate_command)
cli.add_command(view_command)


def main() -> None:
    cli(prog_name="trialkit")
