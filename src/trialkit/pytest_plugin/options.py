"""The plugin's options: `--trialkit-*` flags and `trialkit_*` ini keys, made from the
declarations in `trialkit.run.options` (those marked `pytest`).

Each option is looked up on the command line, then in its environment variable, then in the ini
file (`pytest.ini`, `[tool.pytest.ini_options]`, ...), then in `[tool.trialkit]` of the nearest
`pyproject.toml` from the rootdir up (`trialkit.run.sources`, as `trialkit run` reads it). The
values become a `RunSettings` through `RunSettings.parse`, as `trialkit run`'s do.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from trialkit.run import options as declared_options
from trialkit.run.options import Flag, Option

if TYPE_CHECKING:
    from trialkit.run.settings import RunSettings
    from trialkit.run.sources import Given, Project


def declared() -> tuple[Option, ...]:
    """The options the plugin takes: those declared `pytest` (read when asked, not frozen)."""
    return tuple(option for option in declared_options.OPTIONS if option.pytest)


class Spelled(NamedTuple):
    name: str
    flag: str
    ini: str


OPTIONS = tuple(Spelled(o.name, o.pytest_flag, o.ini) for o in declared())
"""The plugin's options as its users spell them (the docs' tests read these)."""


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("trialkit", "trialkit: trials of LLM prompts and agents")
    for option in declared():
        help_text = option.help_of("pytest")
        if isinstance(option.kind, Flag):
            group.addoption(
                option.pytest_flag,
                action="store_true",
                default=None,
                dest=option.ini,
                help=help_text,
            )
        else:
            group.addoption(
                option.pytest_flag,
                metavar=option.metavar or option.name.upper(),
                default=None,
                dest=option.ini,
                help=help_text,
            )
        parser.addini(option.ini, f"{help_text} (as {option.pytest_flag})", type="string")
    parser.addini(
        "trialkit_files",
        "Glob patterns of Python files whose trialkit Suites are collected [eval_*.py].",
        type="args",
        default=["eval_*.py"],
    )
    parser.addini(
        "trialkit_suites",
        "Suite folders and files collected when pytest is run without path arguments.",
        type="paths",
        default=[],
    )


class RawOptions:
    """Each option's value, from the first place that gives one (see the module's doc)."""

    def __init__(self, config: pytest.Config) -> None:
        from trialkit.run.sources import find_project

        self.config = config
        self.options = declared()
        try:
            self.project: Project = find_project(config.rootpath)
        except ValueError as exc:  # SettingsError
            raise pytest.UsageError(str(exc)) from None
        self.given: dict[str, Given] = {}
        for option in self.options:
            try:
                found = self._lookup(option)
            except ValueError as exc:
                raise pytest.UsageError(str(exc)) from None
            if found is not None:
                self.given[option.name] = found

    @property
    def values(self) -> dict[str, Any]:
        """The values some place gave (not the defaults)."""
        return {name: given.value for name, given in self.given.items()}

    @property
    def where(self) -> dict[str, str]:
        return {name: given.where for name, given in self.given.items()}

    def _lookup(self, option: Option) -> Given | None:
        from trialkit.run.sources import Given, convert, located, lookup

        here = self.config.invocation_params.dir
        flag: Given | None = None
        typed = self.config.getoption(option.ini)
        if typed is not None:
            value = typed if typed is True else convert(option.kind, typed, option.pytest_flag)
            flag = Given(located(option.kind, value, here), "flag", option.pytest_flag)

        def ini(option: Option) -> Given | None:
            text = self.config.getini(option.ini)
            if text in (None, ""):
                return None
            value = convert(option.kind, text, option.ini)
            return Given(located(option.kind, value, self.config.rootpath), "ini", option.ini)

        found = lookup(
            option,
            flag=flag,
            project=lambda: self.project,
            environ=os.environ,
            ini=ini,
            base=here,
            spelled=option.pytest_flag,
        )
        return None if found.source == "default" else found

    def flag(self, name: str) -> bool:
        return bool(self.values.get(name))

    def text(self, name: str) -> str | None:
        value = self.values.get(name)
        return None if value is None else str(value).strip() or None


def run_settings(raw: RawOptions) -> RunSettings:
    """The `RunSettings` of the options; a bad value is a `pytest.UsageError` naming it."""
    from trialkit.run.settings import RunSettings
    from trialkit.task import SuiteError, timeout_problem

    names = {o.name: raw.where.get(o.name, o.pytest_flag) for o in raw.options}
    timeout = raw.values.get("timeout")
    if timeout is not None and (problem := timeout_problem(timeout)) is not None:
        raise pytest.UsageError(f"{names['timeout']}: {problem}")
    values = {
        option.name: raw.values[option.name]
        for option in raw.options
        if option.settings and option.name in raw.values
    }
    try:
        settings = RunSettings.parse(option_names=names, **values)
    except SuiteError as exc:  # SettingsError, or a value RunSettings refuses
        message = str(exc)
        if not message.startswith(tuple(names.values())):
            message = f"trialkit options: {message}"
        raise pytest.UsageError(message) from None
    if settings.adaptive is not None:
        raise pytest.UsageError(
            f"{names['trials']} auto: adaptive trials are for `trialkit run`; give a number"
        )
    return settings


def store_value(raw: RawOptions, config: pytest.Config) -> str | None:
    """The store's URL or path (None: keep nothing); default `.trialkit/trialkit.db` in the
    rootdir."""
    value = raw.text("store")
    if value is not None and value.lower() == "none":
        return None
    if value is None:
        return str(config.rootpath / ".trialkit" / "trialkit.db")
    return value
