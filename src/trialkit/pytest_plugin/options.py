"""The plugin's options: `--trialkit-*` flags, `trialkit_*` ini settings and `[tool.trialkit]`.

Each option is looked up on the command line, then in the ini file (`pytest.ini`,
`[tool.pytest.ini_options]`, ...), then in `pyproject.toml`'s `[tool.trialkit]` table (the same
names without the prefix), then in the environment (only those the CLI reads too). The values,
as typed, become a `RunSettings` through `RunSettings.parse`, as `trialkit run`'s do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from trialkit.run.settings import RunSettings


@dataclass(frozen=True)
class Option:
    name: str
    """The field's name: `--trialkit-<name with dashes>`, ini `trialkit_<name>`."""
    help: str
    metavar: str | None = None
    """None: a flag (true when given)."""
    env: str | None = None

    @property
    def flag(self) -> str:
        return "--trialkit-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        return "trialkit_" + self.name


OPTIONS = (
    Option("trials", "Trials per task (overrides the suite's, the tasks' and the marker's).", "N"),
    Option(
        "model",
        "The model under test when neither the task nor the suite names one [env TRIALKIT_MODEL].",
        "MODEL",
        env="TRIALKIT_MODEL",
    ),
    Option("judge_model", "The model judges use when they name none.", "MODEL"),
    Option(
        "cache",
        "Cassette folder for recorded model calls [env TRIALKIT_CACHE].",
        "DIR",
        env="TRIALKIT_CACHE",
    ),
    Option(
        "cache_mode",
        "live, record, replay or auto [default: auto with --trialkit-cache, else live; "
        "env TRIALKIT_CACHE_MODE].",
        "MODE",
        env="TRIALKIT_CACHE_MODE",
    ),
    Option(
        "store",
        "Where runs are kept: a SQLAlchemy URL or a SQLite file path, or `none` to keep "
        "nothing [env TRIALKIT_STORE; default .trialkit/trialkit.db in the rootdir].",
        "URL",
        env="TRIALKIT_STORE",
    ),
    Option("concurrency", "Trials of one task running at once [default: 10].", "N"),
    Option("timeout", "Per-trial timeout in seconds (overrides the suite's and tasks').", "S"),
    Option("name", "A name for the runs (`trialkit report NAME` finds the latest).", "NAME"),
    Option(
        "offline",
        "Refuse every request of a trial to a host other than this machine.",
    ),
    Option(
        "no_capture",
        "Do not capture the model calls the agent makes with its own SDK clients.",
    ),
    Option(
        "strict_capability",
        "Fail a capability task's test when no trial passed (by default it passes and "
        "reports its pass@k, as the CI gate does).",
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}
FLAGS = {option.name for option in OPTIONS if option.metavar is None}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("trialkit", "trialkit: trials of LLM prompts and agents")
    for option in OPTIONS:
        if option.metavar is None:
            group.addoption(
                option.flag, action="store_true", default=None, dest=option.ini, help=option.help
            )
        else:
            group.addoption(
                option.flag, metavar=option.metavar, default=None, dest=option.ini, help=option.help
            )
        parser.addini(option.ini, f"{option.help} (as {option.flag})", type="string")
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


def tool_table(config: pytest.Config) -> dict[str, Any]:
    """`[tool.trialkit]` of the rootdir's pyproject.toml, keys as fields (dashes as `_`)."""
    path = config.rootpath / "pyproject.toml"
    if not path.is_file():
        return {}
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise pytest.UsageError(f"{path}: cannot read [tool.trialkit]: {exc}") from None
    table = data.get("tool", {}).get("trialkit", {})
    if not isinstance(table, dict):
        raise pytest.UsageError(f"{path}: [tool.trialkit] must be a table")
    values = {str(key).replace("-", "_"): value for key, value in table.items()}
    unknown = sorted(set(values) - set(BY_NAME))
    if unknown:
        known = ", ".join(sorted(BY_NAME))
        raise pytest.UsageError(
            f"{path}: [tool.trialkit]: unknown setting {', '.join(unknown)} (known: {known})"
        )
    return values


class RawOptions:
    """Each option's value as the user typed it, from the first place that gives one."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tool = tool_table(config)
        self.where: dict[str, str] = {}
        """How the user spelled the option each value came from, for messages."""
        self.values: dict[str, Any] = {}
        for option in OPTIONS:
            value, where = self._lookup(option)
            if value is not None:
                self.values[option.name] = value
                self.where[option.name] = where

    def _lookup(self, option: Option) -> tuple[Any, str]:
        given = self.config.getoption(option.ini)
        if given is not None:
            return given, option.flag
        ini = self.config.getini(option.ini)
        if ini not in (None, ""):
            return ini, option.ini
        if option.name in self.tool:
            return self.tool[option.name], f"[tool.trialkit] {option.name}"
        if option.env is not None and os.environ.get(option.env):
            return os.environ[option.env], option.env
        return None, option.flag

    def flag(self, name: str) -> bool:
        value = self.values.get(name)
        if value is None or isinstance(value, bool):
            return bool(value)
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise pytest.UsageError(f"{self.where[name]}: expected true or false, got {value!r}")

    def text(self, name: str) -> str | None:
        value = self.values.get(name)
        return None if value is None else str(value).strip() or None

    def path(self, name: str) -> str | None:
        """A path option: relative to the rootdir when it comes from the ini file or
        `[tool.trialkit]`, else (a flag, the environment) to the working directory."""
        text = self.text(name)
        if text is None or os.path.isabs(text) or "://" in text:
            return text
        where = self.where[name]
        if where.startswith("--") or where.startswith("TRIALKIT_"):
            return str(self.config.invocation_params.dir / text)
        return str(self.config.rootpath / text)

    def number(self, name: str, kind: type[int] | type[float]) -> Any:
        text = self.text(name)
        if text is None:
            return None
        noun = "a whole number >= 1" if kind is int else "a number of seconds > 0"
        try:
            number = kind(text)
        except ValueError:
            raise pytest.UsageError(f"{self.where[name]}: expected {noun}, got {text!r}") from None
        if not number > 0:
            raise pytest.UsageError(f"{self.where[name]}: expected {noun}, got {text!r}")
        return number


def run_settings(raw: RawOptions) -> RunSettings:
    """The `RunSettings` of the options; a bad value is a `pytest.UsageError` naming it."""
    from trialkit.run.settings import DEFAULT_CONCURRENCY, RunSettings
    from trialkit.task import SuiteError, timeout_problem

    names = {option.name: raw.where.get(option.name, option.flag) for option in OPTIONS}
    timeout = raw.number("timeout", float)
    if timeout is not None and (problem := timeout_problem(timeout)) is not None:
        raise pytest.UsageError(f"{names['timeout']}: {problem}")
    try:
        settings = RunSettings.parse(
            trials=raw.text("trials"),
            cache=raw.path("cache"),
            cache_mode=raw.text("cache_mode"),
            option_names=names,
            concurrency=raw.number("concurrency", int) or DEFAULT_CONCURRENCY,
            timeout=timeout,
            name=raw.text("name"),
            model=raw.text("model"),
            judge_model=raw.text("judge_model"),
            capture=not raw.flag("no_capture"),
            offline=raw.flag("offline"),
        )
    except SuiteError as exc:  # SettingsError, or a value RunSettings refuses
        message = str(exc)
        if not message.startswith(("--", "trialkit_", "TRIALKIT_", "[tool")):
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
    return raw.path("store")
