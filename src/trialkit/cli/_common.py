"""What the commands share: the store option, error handling and exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_ERRORS = 3
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """An expected error: printed as one line on stderr, exit with `code`."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def store_option(fn: F) -> F:
    return click.option(
        "--store",
        "store_url",
        metavar="URL",
        help="Where runs are kept: a SQLAlchemy URL or a SQLite file path "
        "[env TRIALKIT_STORE; default .trialkit/trialkit.db].",
    )(fn)


def format_options(*formats: str) -> Callable[[F], F]:
    """`--format` (the first of `formats` by default) and `-o/--output FILE`."""

    def decorate(fn: F) -> F:
        fn = click.option(
            "-o",
            "--output",
            type=click.Path(dir_okay=False),
            metavar="FILE",
            help="Write to FILE instead of standard output.",
        )(fn)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(list(formats)),
            default=formats[0],
            show_default=True,
        )(fn)

    return decorate


def debug_option(fn: F) -> F:
    return click.option("--debug", is_flag=True, help="Show tracebacks of errors.")(fn)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    raise CliError(message, code)


def handle_errors(fn: F) -> F:
    """Turn expected errors into one line on stderr and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = bool(kwargs.get("debug"))
        from trialkit.loaders.python import TargetError
        from trialkit.models.registry import UnknownModel
        from trialkit.store import StoreError
        from trialkit.task import SuiteError

        try:
            return fn(*args, **kwargs)
        except CliError as exc:
            _show(exc, debug)
            sys.exit(exc.code)
        except (SuiteError, TargetError, StoreError, UnknownModel) as exc:
            _show(exc, debug)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


def _show(exc: BaseException, debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exception(exc)
    click.echo(f"error: {exc}", err=True)


def stdout_console() -> Console:
    """The console for results; when piped or logged, wide enough not to cut tables."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=max(console.width, 120))
    return console


def open_store(url: str | None) -> Any:
    from trialkit.store import Store, resolve_store_url

    return Store(resolve_store_url(url))
