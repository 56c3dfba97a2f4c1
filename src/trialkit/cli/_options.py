"""The click options of a command, made from the declarations in `trialkit.run.options`, and
their values read in the one order: the flag, the environment, `[tool.trialkit]`, the default."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from trialkit.run.options import (
    Choice,
    Flag,
    Kind,
    Location,
    Many,
    Names,
    Number,
    Option,
    Whole,
    cli_options,
)

F = TypeVar("F", bound=Callable[..., Any])


def click_type(kind: Kind) -> Any:
    if isinstance(kind, Whole):
        return click.IntRange(min=kind.minimum)
    if isinstance(kind, Number):
        return click.FloatRange(kind.minimum, kind.maximum, min_open=kind.open)
    if isinstance(kind, Choice):
        return click.Choice(kind.choices)
    if isinstance(kind, Location) and not kind.url:
        return click.Path(file_okay=not kind.folder, dir_okay=kind.folder)
    return click.STRING


def click_option(option: Option, command: str) -> Callable[[F], F]:
    """The option as click declares it for `command`. A setting that may be on elsewhere
    (the environment, `[tool.trialkit]`) can be turned off here too: `--offline/--no-offline`."""
    help_text = option.help_of(command)
    names = [option.cli_flag, *([option.short] if option.short else [])]
    if isinstance(option.kind, Flag):
        if option.pyproject or option.env:
            off = (
                "--capture"
                if option.cli_flag == "--no-capture"
                else "--no-" + option.cli_flag.removeprefix("--")
            )
            names[0] = f"{option.cli_flag}/{off}"
            return click.option(*names, option.param, default=None, help=help_text)
        return click.option(*names, option.param, is_flag=True, default=None, help=help_text)
    return click.option(
        *names,
        option.param,
        type=click_type(option.kind),
        multiple=isinstance(option.kind, Many | Names),
        metavar=option.metavar,
        default=None,
        help=help_text,
    )


def options_of(command: str, options: Sequence[Option] | None = None) -> Callable[[F], F]:
    """Every declared option of `command`, in the order of declaration."""
    chosen = cli_options(command, options)

    def decorate(fn: F) -> F:
        for option in reversed(chosen):
            fn = click_option(option, command)(fn)
        return fn

    return decorate


class Chosen:
    """The values of a command's options, each with where it came from."""

    def __init__(self, given: dict[str, Any], options: Sequence[Option]) -> None:
        self.given = given
        self.options = options

    def __getattr__(self, name: str) -> Any:
        try:
            return self.given[name].value
        except KeyError:
            raise AttributeError(name) from None

    def typed(self, name: str) -> bool:
        """Whether the user gave this option as a flag."""
        return bool(self.given[name].source == "flag")

    def where(self) -> dict[str, str]:
        """How each value's source is spelled, for the messages of `RunSettings.parse`."""
        return {name: given.where for name, given in self.given.items()}

    def for_settings(self) -> dict[str, Any]:
        """The keywords of `RunSettings.parse` (values left unset are the record's defaults)."""
        return {
            o.name: self.given[o.name].value
            for o in self.options
            if o.settings and self.given[o.name].value is not None
        }


def read_options(
    command: str,
    params: dict[str, Any],
    *,
    options: Sequence[Option] | None = None,
    ctx: click.Context | None = None,
) -> Chosen:
    """The values of `command`'s declared options: `params` are click's; a bad value in the
    environment or `[tool.trialkit]` is a `SettingsError` naming where it is."""
    from trialkit.run.sources import Given, find_project, lookup

    ctx = ctx or click.get_current_context()
    # Read (and checked) even when flags give every value: a bad key is an error at once.
    found = find_project(Path.cwd(), options)
    given: dict[str, Given] = {}
    chosen = cli_options(command, options)
    for option in chosen:
        value = params.get(option.param)
        typed = ctx.get_parameter_source(option.param) is click.core.ParameterSource.COMMANDLINE
        flag = Given(_as_typed(option, value), "flag", option.cli_flag) if typed else None
        given[option.name] = lookup(
            option,
            flag=flag,
            project=lambda: found,
            environ=os.environ,
            spelled=option.cli_flag,
        )
    return Chosen(given, chosen)


def _as_typed(option: Option, value: Any) -> Any:
    if isinstance(option.kind, Names):
        return option.kind.from_toml(list(value))
    if isinstance(option.kind, Many):
        return tuple(value)
    return value


def store_value(chosen: Chosen | None = None) -> str | None:
    """The store a command opens: `--store`, else `TRIALKIT_STORE`, else `[tool.trialkit]`'s
    `store` (relative to its pyproject.toml), else None (the default path)."""
    from trialkit.run import options as declared
    from trialkit.run.sources import find_project, from_environment, settings_error

    if chosen is not None:
        found = chosen.given["store"]
    else:
        option = next(o for o in declared.OPTIONS if o.name == "store")
        found = from_environment(option, os.environ) or find_project(Path.cwd()).get(option)
    if found is None or found.value is None:
        return None
    if found.source == "pyproject" and str(found.value).lower() == "none":
        raise settings_error(
            f"{found.where}: none (keep nothing) is for the pytest plugin; trialkit commands "
            "keep runs in a store"
        )
    return str(found.value)
