"""Code graders over the world: the files in the trial's workspace and what changed in it.

File graders read from `ctx.world.path` (the workspace folder of a `Workspace` environment);
for a task whose world has no `.path` they return an *error* score saying so. Diff graders read
`ctx.outcome.diff`. Paths are relative to the workspace root with `/` separators; absolute paths
and `..` are refused when the grader is made.

Globs (`only_changed`, `unchanged`) match the whole relative path:

- `*` matches within one path segment, `?` one character of it, `[abc]` one of a set;
- `**` matches any number of whole segments, none included (`src/**/*.py` matches `src/a.py`);
- a pattern without `/` matches the file name at any depth (`*.pyc` matches `a/b/c.pyc`), as in
  `PurePosixPath.match` and `.gitignore`;
- a pattern ending in `/` matches everything under that folder (`build/` is `build/**`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from trialkit.graders.base import GradeContext, Grader
from trialkit.outcome import FileChange, WorkspaceDiff
from trialkit.score import Score

_MAX_LISTED = 10


class NoWorkspaceError(RuntimeError):
    """A workspace grader ran for a task whose world has no workspace folder."""


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_relative(path: str, who: str) -> str:
    """`path` normalised to `/` separators; `ValueError` if it is absolute or climbs with `..`."""
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"{who}: path must be a non-empty string")
    posix = path.replace("\\", "/")
    if PurePosixPath(posix).is_absolute() or PureWindowsPath(path).drive:
        raise ValueError(f"{who}: {path!r} must be relative to the workspace, not absolute")
    if ".." in PurePosixPath(posix).parts:
        raise ValueError(f"{who}: {path!r} must stay inside the workspace (no '..')")
    while posix.startswith("./"):
        posix = posix[2:]
    return posix


def workspace_root(ctx: GradeContext) -> Path:
    """The workspace folder of this trial; `NoWorkspaceError` when the world has none."""
    path = getattr(ctx.world, "path", None)
    if path is None:
        raise NoWorkspaceError(
            "the task has no workspace: its world has no `.path` "
            "(give it a Workspace environment to grade files)"
        )
    return Path(path)


def _resolve(ctx: GradeContext, rel: str) -> tuple[Path, bool]:
    """The file's path and whether it stays inside the workspace once symlinks are followed."""
    root = workspace_root(ctx)
    target = root / rel
    try:
        inside = target.resolve().is_relative_to(root.resolve())
    except OSError:
        inside = False
    return target, inside


def _read_text(ctx: GradeContext, rel: str) -> str | Score:
    """The file's text, or a failing score saying why it cannot be read."""
    target, inside = _resolve(ctx, rel)
    if not inside:
        return Score.from_bool(False, rationale=f"{rel} points outside the workspace")
    if not target.exists():
        return Score.from_bool(False, rationale=f"{rel} does not exist")
    if not target.is_file():
        return Score.from_bool(False, rationale=f"{rel} is not a file")
    try:
        return target.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return Score.from_bool(False, rationale=f"{rel} is not UTF-8 text")


@dataclass
class file_exists(Grader):
    """A regular file exists at `path` in the workspace (a folder does not count)."""

    path: str
    blocking = True

    def __post_init__(self) -> None:
        self.path = check_relative(self.path, "file_exists")

    @property
    def name(self) -> str:
        return f"file_exists({self.path!r})"

    def grade(self, ctx: GradeContext) -> Score:
        target, inside = _resolve(ctx, self.path)
        if not inside:
            return Score.from_bool(False, rationale=f"{self.path} points outside the workspace")
        if target.is_file():
            return Score.from_bool(True)
        why = "is a folder, not a file" if target.is_dir() else "does not exist"
        return Score.from_bool(False, rationale=f"{self.path} {why}")


@dataclass
class file_absent(Grader):
    """Nothing exists at `path` in the workspace (a dangling symlink counts as something)."""

    path: str
    blocking = True

    def __post_init__(self) -> None:
        self.path = check_relative(self.path, "file_absent")

    @property
    def name(self) -> str:
        return f"file_absent({self.path!r})"

    def grade(self, ctx: GradeContext) -> Score:
        target = workspace_root(ctx) / self.path
        if target.is_symlink() or target.exists():
            kind = "folder" if target.is_dir() else "file"
            return Score.from_bool(False, rationale=f"{self.path} exists (a {kind})")
        return Score.from_bool(True)


@dataclass
class file_contains(Grader):
    """The file at `path` contains `text`, or matches the regular expression `pattern`.

    Give exactly one of them. Case-insensitive unless `case_sensitive` (for both). The pattern is
    searched anywhere in the file (`re.search`, with `re.MULTILINE`).
    """

    path: str
    text: str | None = None
    pattern: str | None = field(default=None, kw_only=True)
    case_sensitive: bool = field(default=False, kw_only=True)
    _regex: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    blocking = True

    def __post_init__(self) -> None:
        self.path = check_relative(self.path, "file_contains")
        if (self.text is None) == (self.pattern is None):
            raise ValueError("file_contains: give exactly one of text and pattern")
        if self.pattern is not None:
            flags = re.MULTILINE | (0 if self.case_sensitive else re.IGNORECASE)
            try:
                self._regex = re.compile(self.pattern, flags)
            except re.error as exc:
                raise ValueError(
                    f"file_contains: pattern: invalid regular expression: {exc}"
                ) from None

    @property
    def name(self) -> str:
        what = repr(self.text) if self.pattern is None else f"pattern={self.pattern!r}"
        return f"file_contains({self.path!r}, {_short(what, 40)})"

    def grade(self, ctx: GradeContext) -> Score:
        content = _read_text(ctx, self.path)
        if isinstance(content, Score):
            return content
        if self._regex is not None:
            found = self._regex.search(content)
            if found is None:
                return Score.from_bool(
                    False, rationale=f"{self.path} does not match /{_short(self.pattern or '')}/"
                )
            return Score.from_bool(True, rationale=f"matched {_short(found.group(0))!r}")
        text = self.text or ""
        ok = text in content if self.case_sensitive else text.casefold() in content.casefold()
        why = None if ok else f"{self.path} does not contain {_short(text)!r}"
        return Score.from_bool(ok, rationale=why)


@dataclass
class file_json(Grader):
    """The file at `path` is JSON; `where` is a predicate on the parsed value, `schema` a JSON
    Schema it must satisfy."""

    path: str
    where: Callable[[Any], bool] | None = None
    schema: Mapping[str, Any] | None = None
    blocking = True  # `where` is user code

    def __post_init__(self) -> None:
        self.path = check_relative(self.path, "file_json")
        if self.schema is not None:
            from jsonschema import validators

            validator_cls = validators.validator_for(self.schema)
            try:
                validator_cls.check_schema(dict(self.schema))
            except Exception as exc:
                raise ValueError(f"file_json: schema: not a valid JSON Schema: {exc}") from None

    @property
    def name(self) -> str:
        return f"file_json({self.path!r})"

    def grade(self, ctx: GradeContext) -> Score:
        content = _read_text(ctx, self.path)
        if isinstance(content, Score):
            return content
        try:
            value = json.loads(content)
        except json.JSONDecodeError as exc:
            return Score.from_bool(False, rationale=f"{self.path} is not JSON: {exc}")
        if self.schema is not None:
            from jsonschema import validators

            validator = validators.validator_for(self.schema)(self.schema)
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
            if errors:
                first = errors[0]
                at = "/".join(str(p) for p in first.path) or "(root)"
                return Score.from_bool(
                    False,
                    rationale=f"{self.path} does not match the schema at {at}: {first.message}",
                )
        if self.where is not None and not self.where(value):
            described = getattr(self.where, "__name__", "where")
            return Score.from_bool(False, rationale=f"{self.path} does not satisfy {described}")
        return Score.from_bool(True)


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("/"):
        pattern += "**"
    if "/" not in pattern:
        pattern = "**/" + pattern
    out: list[str] = []
    segments = pattern.split("/")
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(out), re.DOTALL)


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        c = segment[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = segment[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def glob_match(path: str, pattern: str) -> bool:
    """Whether the relative `path` matches `pattern` (see the module docs for the rules)."""
    return _glob_regex(pattern).fullmatch(path) is not None


def _check_globs(globs: tuple[str, ...], who: str) -> tuple[str, ...]:
    checked = tuple(check_relative(g, who) for g in globs)
    for g in checked:
        _glob_regex(g)  # raises re.error for a malformed pattern
    return checked


def _diff(ctx: GradeContext) -> WorkspaceDiff:
    if ctx.outcome.diff is None:
        raise NoWorkspaceError(
            "the task has no workspace diff: its environment did not record what changed "
            "(give it a Workspace environment)"
        )
    return ctx.outcome.diff


def _list_changes(changes: list[FileChange]) -> str:
    shown = [f"{c.path} ({c.change})" for c in changes[:_MAX_LISTED]]
    if len(changes) > _MAX_LISTED:
        shown.append(f"… and {len(changes) - _MAX_LISTED} more")
    return ", ".join(shown)


@dataclass(init=False)
class only_changed(Grader):
    """Every file the trial added, modified or deleted matches one of `globs`.

    `only_changed()` with no globs passes only when nothing changed.
    """

    globs: tuple[str, ...]

    def __init__(self, *globs: str) -> None:
        self.globs = _check_globs(globs, "only_changed")

    @property
    def name(self) -> str:
        return f"only_changed({', '.join(repr(g) for g in self.globs)})"

    def grade(self, ctx: GradeContext) -> Score:
        changes = _diff(ctx).files
        others = [c for c in changes if not any(glob_match(c.path, g) for g in self.globs)]
        if others:
            return Score.from_bool(
                False, rationale=f"changed outside {list(self.globs)}: {_list_changes(others)}"
            )
        return Score.from_bool(True, rationale=f"{len(changes)} file(s) changed, all allowed")


@dataclass(init=False)
class unchanged(Grader):
    """No file matching any of `globs` was added, modified or deleted."""

    globs: tuple[str, ...]

    def __init__(self, *globs: str) -> None:
        if not globs:
            raise ValueError("unchanged: give at least one glob (use only_changed() for none)")
        self.globs = _check_globs(globs, "unchanged")

    @property
    def name(self) -> str:
        return f"unchanged({', '.join(repr(g) for g in self.globs)})"

    def grade(self, ctx: GradeContext) -> Score:
        hit = [c for c in _diff(ctx).files if any(glob_match(c.path, g) for g in self.globs)]
        if hit:
            return Score.from_bool(False, rationale=f"changed: {_list_changes(hit)}")
        return Score.from_bool(True)
