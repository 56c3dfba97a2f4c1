"""`trialkit validate TARGET`: check a suite without running it, reporting every problem."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

import click

from trialkit.cli._common import EXIT_USAGE, debug_option, handle_errors

if TYPE_CHECKING:
    from trialkit.task import Suite


@click.command("validate")
@click.argument("target")
@debug_option
@handle_errors
def validate_command(target: str, debug: bool) -> None:
    """Check the suite TARGET without running it: a suite folder, a suite file (.yaml, .yml,
    .json), another tool's file (promptfoo config, openai/evals or inspect_ai samples; or
    prefixed evals:, inspect:, promptfoo:, hf:), or path.py[:name].

    Every problem is printed on stderr as file:line: field: message, then the command exits 2.
    A good suite prints its id and number of tasks and exits 0. Checking imports the Python the
    suite names and reads its data files, as running it would.
    """
    from trialkit.loaders.errors import SuiteFileError
    from trialkit.loaders.python import TargetError
    from trialkit.task import SuiteError

    try:
        suite = _load(target)
    except SuiteFileError as exc:
        fail_with_problems(exc.problems, target)
    except (TargetError, SuiteError) as exc:
        fail_with_problems([exc], target)
    count = len(suite.tasks)
    click.echo(f"ok: suite {suite.id}, {count} task{'' if count == 1 else 's'}")


def _load(target: str) -> Suite:
    from trialkit.loaders.target import load_target

    return load_target(target)


def fail_with_problems(problems: Sequence[object], target: str) -> NoReturn:
    """Print each problem on its own line of stderr, then a count, and exit 2."""
    for problem in problems:
        click.echo(str(problem), err=True)
    count = len(problems)
    click.echo(f"error: {count} problem{'' if count == 1 else 's'} in {target}", err=True)
    sys.exit(EXIT_USAGE)
