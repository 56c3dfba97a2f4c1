"""`trialkit regrade RUN`: score a stored run again with the suite's current graders."""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

import click

from trialkit.cli._common import (
    debug_option,
    fail,
    handle_errors,
    open_store,
    stdout_console,
)
from trialkit.cli._options import options_of, read_options, store_value
from trialkit.run.settings import RunSettings, SettingsError

if TYPE_CHECKING:
    from trialkit.task import Suite


@click.command("regrade")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--suite",
    "target",
    metavar="TARGET",
    help="Load the suite from TARGET (as `trialkit run TARGET`) instead of the source the run "
    "recorded; needed for runs stored before trialkit recorded it.",
)
@click.option(
    "--grader",
    "graders",
    multiple=True,
    metavar="NAME",
    help="Regrade only this grader (its full name, e.g. \"contains('paris')\", or its kind, "
    "e.g. contains) and keep the other scores as stored (repeatable) [default: every grader].",
)
@options_of("regrade")
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict changes and the run.")
@debug_option
@handle_errors
def regrade_command(
    run_ref: str,
    target: str | None,
    graders: tuple[str, ...],
    quiet: bool,
    debug: bool,
    **params: Any,
) -> None:
    """Score the stored run RUN again with its suite's current graders, without running the agent.

    The result is a new run in the same store (its config names RUN in `regrade_of`); RUN is
    not changed. Trials that errored before grading stay errors. A task of RUN that the suite
    no longer has, or a --grader the suite does not have, is an error and nothing is stored.

    Exit codes, as `trialkit run`: 0 the new run's gate passed; 1 it failed; 2 bad usage
    (unknown run, grader or task); 3 more trials errored than the run's --fail-on-error
    allows.
    """
    from trialkit._sync import run_blocking
    from trialkit.reports import render_terminal
    from trialkit.reports._gate import gate_text
    from trialkit.run.regrade import regrade
    from trialkit.store.resume import load_run

    o = read_options("regrade", params)
    try:
        settings = RunSettings.parse(option_names=o.where(), **o.for_settings())
    except SettingsError as exc:
        fail(str(exc))
    store_url = store_value(o)
    if o.offline:
        from trialkit.cli._offline import confine_offline

        confine_offline(store_url)
    with open_store(store_url, create=False) as store:
        try:
            run_id = store.resolve_run(run_ref)
        except LookupError as exc:
            fail(str(exc).strip("'\""))
        old_run, _, _ = load_run(store, run_id)
        suite = _load(old_run.config, target, run_id)
        result = run_blocking(
            functools.partial(regrade, store, run_id, suite, settings=settings, graders=graders)
        )
    report = result.report
    console = stdout_console()
    if not quiet:
        render_terminal(report, console)
    click.echo(f"regrade of run {run_id}: {result.changes.summary()}")
    gate = report.gate()
    click.echo(f"new run {report.run.id}: {gate_text(gate)}")
    sys.exit(gate.exit_code)


def _load(config: dict[str, Any], target: str | None, run_id: str) -> Suite:
    """The suite, or every problem of a bad suite file on its own line (exit 2)."""
    from trialkit.cli.validate import fail_with_problems
    from trialkit.loaders.errors import SuiteFileError
    from trialkit.run.regrade import source_suite

    try:
        return source_suite(config, target, run_id=run_id)
    except SuiteFileError as exc:
        fail_with_problems(exc.problems, target or str(config.get("source")))
