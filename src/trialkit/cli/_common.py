"""What the commands share: the store option, error handling and exit codes."""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from rich.console import Console

if TYPE_CHECKING:
    from trialkit.labels import Label
    from trialkit.store import Store

EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_ERRORS = 3
EXIT_RUN_FAILED = 4
"""The run could not finish: the store or the executor failed mid-run (`RunFailed`)."""
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


class CliError(Exception):
    """An expected error: printed as one line on stderr, exit with `code`."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def store_option(fn: F) -> F:
    """`--store URL`, as `trialkit.run.options` declares it (with `TRIALKIT_STORE` and
    `[tool.trialkit]`'s `store`, read by `open_store`)."""
    from trialkit.cli._options import click_option
    from trialkit.run.options import OPTIONS

    return click_option(next(o for o in OPTIONS if o.name == "store"), "*")(fn)


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
        from trialkit._errors import RunFailed
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
        except RunFailed as exc:
            _show(exc, debug)
            sys.exit(EXIT_RUN_FAILED)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)

    return wrapper  # type: ignore[return-value]


def _show(exc: BaseException, debug: bool) -> None:
    from trialkit.secrets import redact

    if debug:
        import traceback

        click.echo(redact("".join(traceback.format_exception(exc))), err=True, nl=False)
    click.echo(redact(f"error: {exc}"), err=True)


def stdout_console() -> Console:
    """The console for results. When piped or logged it is 120 columns at least, for what is
    not a table; tables there are plain lines of any length (`trialkit.reports._table`)."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=max(console.width, 120))
    return console


def open_store(url: str | None, *, create: bool = False) -> Any:
    """The store the command works on. Only `trialkit run` creates one (`create`): every other
    command reads runs, so a missing store is an error, and no file or folder is made."""
    from trialkit.cli._options import store_value
    from trialkit.store import Store, resolve_store_url

    if url is None:
        url = store_value()
    return Store(resolve_store_url(url, create=create), create=create)


def resolve_label_runs(
    store: Store, path: str, labels: list[Label], run_id: str | None, *, strict: bool
) -> list[Label]:
    """The labels of file `path` with the runs they name resolved to ids (names and prefixes
    allowed, as everywhere); a label that names no run gets `run_id`, and is an error without
    one. With `strict`, a label of a run other than `run_id` is an error too."""
    found: dict[str, str] = {}
    chosen = []
    for label in labels:
        where = f"{path}: the label of {label.task_id}#{label.trial}"
        if label.run_id is None:
            if run_id is None:
                fail(f"{where} names no run; give the run with --run RUN")
            chosen.append(label.model_copy(update={"run_id": run_id}))
            continue
        if label.run_id not in found:
            try:
                found[label.run_id] = store.resolve_run(label.run_id)
            except LookupError as exc:
                fail(f"{where}: {exc}")
        resolved = found[label.run_id]
        if strict and run_id is not None and resolved != run_id:
            fail(
                f"{where} is for run {resolved}, not the run {run_id} that --run names; "
                "nothing was imported"
            )
        chosen.append(label.model_copy(update={"run_id": resolved}))
    return chosen


def write_output(path: str, text: str, what: str = "the output") -> None:
    """Write `text` to the file `path`, making its folder first; a failure is one line. No
    secret is written (`trialkit.secrets`): every report and export file passes here."""
    from trialkit.secrets import redact

    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(redact(text), encoding="utf-8")
    except OSError as exc:
        fail(f"{path}: cannot write {what}: {exc.strerror or exc}")


def show(
    output: str | None,
    *,
    draw: Callable[[Console], None] | None = None,
    text: str = "",
    width: int = 100,
) -> None:
    """A table (`draw` renders it on a console) or `text`, on standard output or into the
    file `output` (a table in a file: plain, `width` columns)."""
    if draw is not None:
        if output is None:
            draw(stdout_console())
            return
        buffer = io.StringIO()
        draw(Console(file=buffer, width=width, color_system=None))
        write_output(output, buffer.getvalue())
        return
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
    else:
        write_output(output, text)
