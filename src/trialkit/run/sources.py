"""Where an option's value comes from, in one order for the command line and the pytest plugin:
the flag, then the environment variable, then (under pytest) the ini key, then `[tool.trialkit]`
in `pyproject.toml`, then the option's default.

`[tool.trialkit]` is read from the nearest `pyproject.toml` that has that table, looking from
the working directory (for pytest: the rootdir) up to the repository's root (a folder holding
`.git` or `.hg`), as ruff finds its settings. A bad key or value there, or a bad value of an
environment variable, is a `SettingsError` of one line naming the file, the line and the key
(or the variable).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialkit.run import options as declared
from trialkit.run.options import Flag, Kind, Location, Many, Names, Option, Source, by_key

if TYPE_CHECKING:
    from trialkit.run.settings import SettingsError

TABLE = "[tool.trialkit]"
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\s*=""")


def settings_error(message: str) -> SettingsError:
    from trialkit.run.settings import SettingsError  # not at import: pytest sessions stay light

    return SettingsError(message)


@dataclass(frozen=True)
class Given:
    """An option's value and where it came from, spelled as the user knows it (`--trials`,
    `TRIALKIT_TRIALS`, `trialkit_trials`, `pyproject.toml:3: [tool.trialkit] trials`)."""

    value: Any
    source: Source
    where: str


@dataclass(frozen=True)
class Project:
    """The `[tool.trialkit]` table of one `pyproject.toml` (none: `path` is None)."""

    path: Path | None = None
    table: Mapping[str, Any] | None = None
    """Its values by key, each read as its option's kind."""
    lines: Mapping[str, int] | None = None
    """Each key's line in the file, where it could be found."""

    def get(self, option: Option) -> Given | None:
        if self.path is None or self.table is None or option.key not in self.table:
            return None
        value = located(option.kind, self.table[option.key], self.path.parent)
        return Given(value, "pyproject", self.where(option.key))

    def where(self, key: str) -> str:
        assert self.path is not None
        line = (self.lines or {}).get(key)
        return f"{shown(self.path)}{f':{line}' if line else ''}: {TABLE} {key}"


def shown(path: Path) -> str:
    """`path` relative to the working directory when it is near, else whole."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return relative if not relative.startswith("../../") else str(path)


def find_project(start: Path, options: Sequence[Option] | None = None) -> Project:
    """The `[tool.trialkit]` of the nearest `pyproject.toml` above `start` that has one."""
    import tomllib

    for folder in [start, *start.parents]:
        path = folder / "pyproject.toml"
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
                data = tomllib.loads(text)
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise settings_error(f"{shown(path)}: cannot be read: {exc}") from None
            tool = data.get("tool")
            if isinstance(tool, dict) and "trialkit" in tool:
                return read_table(path, text, tool["trialkit"], options)
        if (folder / ".git").exists() or (folder / ".hg").exists():
            break
    return Project()


def read_table(
    path: Path, text: str, table: Any, options: Sequence[Option] | None = None
) -> Project:
    """The table checked: every key known, none given twice (as `cache-mode` and
    `cache_mode`), every value of its option's kind."""
    lines = key_lines(text)
    if not isinstance(table, dict):
        raise settings_error(f"{shown(path)}: {TABLE} must be a table")
    known = by_key(options)
    keys: dict[str, Any] = {}
    for raw, value in table.items():
        key = str(raw).replace("_", "-")
        line = lines.get(str(raw))
        where = f"{shown(path)}{f':{line}' if line else ''}"
        if key not in known:
            raise settings_error(f"{where}: {unknown_key(str(raw), known, options)}")
        if key in keys:
            raise settings_error(f"{where}: {TABLE} {raw}: given twice (as {key} too)")
        # every value checked here, by `trialkit run` and pytest alike, whichever reads it
        keys[key] = convert(known[key].kind, value, f"{where}: {TABLE} {key}", toml=True)
        if line:
            lines.setdefault(key, line)
    return Project(path, keys, {k: lines[k] for k in keys if k in lines})


def unknown_key(key: str, known: Mapping[str, Option], options: Sequence[Option] | None) -> str:
    names = sorted(known)
    message = f"{TABLE}: unknown setting {key} (known: {', '.join(names)})"
    flags = {
        o.key: o for o in (declared.OPTIONS if options is None else options) if not o.pyproject
    }
    if key.replace("_", "-") in flags:
        flag = flags[key.replace("_", "-")].cli_flag
        return f"{message}; {flag} is a flag of a single run, not a setting"
    near = difflib.get_close_matches(key.replace("_", "-"), names, n=1, cutoff=0.6)
    return f"{message}; did you mean {near[0]}?" if near else message


def key_lines(text: str) -> dict[str, int]:
    """The line of each key of `[tool.trialkit]` in the file's text (keys as written)."""
    found: dict[str, int] = {}
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None and not line.lstrip().startswith("[["):
            name = "".join(header.group(1).split()).replace('"', "").replace("'", "")
            inside = name == "tool.trialkit"
            if name.startswith("tool.trialkit."):  # a table in the table: its key's line
                found.setdefault(name.removeprefix("tool.trialkit.").split(".")[0], number)
            continue
        if line.lstrip().startswith("[["):
            inside = False
            continue
        key = _KEY.match(line) if inside else None
        if key is not None:
            found.setdefault(next(g for g in key.groups() if g), number)
    return found


def convert(kind: Kind, value: Any, where: str, *, toml: bool = False) -> Any:
    """`value` read as `kind`; a bad one is a `SettingsError` naming `where`."""
    try:
        return kind.from_toml(value) if toml else kind.from_text(str(value))
    except ValueError as exc:
        raise settings_error(f"{where}: expected {exc}, got {value!r}") from None


def located(kind: Kind, value: Any, base: Path | None) -> Any:
    """A relative path made absolute against `base` (URLs and `none` stay as they are)."""
    if not isinstance(kind, Location) or base is None or not isinstance(value, str):
        return value
    if not value or os.path.isabs(value) or "://" in value or value.lower() == "none":
        return value
    return str(base / value)


def from_environment(
    option: Option, environ: Mapping[str, str], base: Path | None = None
) -> Given | None:
    """The option's value from its environment variable (an empty one is unset)."""
    if option.env is None or not environ.get(option.env, "").strip():
        return None
    value = convert(option.kind, environ[option.env], option.env)
    return Given(located(option.kind, value, base), "env", option.env)


def lookup(
    option: Option,
    *,
    flag: Given | None,
    project: Callable[[], Project],
    environ: Mapping[str, str],
    ini: Callable[[Option], Given | None] | None = None,
    base: Path | None = None,
    spelled: str,
) -> Given:
    """The option's value from the first place that gives one. `base`: the folder relative
    paths of a flag or variable are taken from (None: left relative); `spelled`: how the
    caller's users name the option, for a value that is the default."""
    if flag is not None:
        return flag
    given = from_environment(option, environ, base)
    if given is None and ini is not None:
        given = ini(option)
    if given is None and option.pyproject:
        given = project().get(option)
    if given is not None:
        return given
    return Given(default_of(option), "default", spelled)


def default_of(option: Option) -> Any:
    if option.default is None and isinstance(option.kind, Flag):
        return False
    if option.default is None and isinstance(option.kind, Many | Names):
        return ()
    return option.default
