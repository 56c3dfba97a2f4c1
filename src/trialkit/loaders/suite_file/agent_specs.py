"""Suite-file entries for the graders of agents: tool calls and the workspace they changed."""

from __future__ import annotations

from pydantic import Field, JsonValue

from trialkit import graders
from trialkit.graders.base import GraderLike
from trialkit.loaders.errors import FieldPath
from trialkit.loaders.suite_file.context import BuildContext
from trialkit.loaders.suite_file.entry import GraderEntry
from trialkit.loaders.suite_file.fields import Count, FileModel, Shorthand, Text


class ToolCalledArgs(Shorthand):
    """Arguments of `tool_called`; `tool_called: Read` is the short form."""

    short_field = "name"
    name: str
    """The tool's name."""
    args: dict[str, JsonValue] | None = None
    """Arguments the call must have (a subset; values compared with ==)."""
    times: Count | None = None
    """Exactly this many matching calls."""


class ToolCalled(GraderEntry):
    """The agent called the tool (with these arguments, this many times)."""

    name = "tool_called"
    tool_called: ToolCalledArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.tool_called
        return self._make(ctx, path, graders.tool_called, a.name, a.args, times=a.times)


class ToolNotCalled(GraderEntry):
    """The agent never called the tool."""

    name = "tool_not_called"
    tool_not_called: str

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.tool_not_called, self.tool_not_called)


class ToolOrder(GraderEntry):
    """The agent called these tools in this order (others may come between)."""

    name = "tool_order"
    tool_order: list[str] = Field(min_length=1)

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.tool_order, *self.tool_order)


class CountArgs(Shorthand):
    """A limit; `max_tool_calls: 5` is the short form."""

    short_field = "n"
    n: Count
    name: str | None = None
    """Count only this tool's calls (for `max_tool_calls`)."""


class MaxToolCalls(GraderEntry):
    """The agent made at most `n` tool calls (of the tool `name`, if given)."""

    name = "max_tool_calls"
    max_tool_calls: CountArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.max_tool_calls
        return self._make(ctx, path, graders.max_tool_calls, a.n, a.name)


class MaxTurns(GraderEntry):
    """The agent called its model at most `n` times."""

    name = "max_turns"
    max_turns: Count

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.max_turns, self.max_turns)


class NoArgs(Shorthand):
    """No arguments: `no_tool_errors:` (or `{}`)."""

    allow_null = True


class NoToolErrors(GraderEntry):
    """No tool call of the agent errored."""

    name = "no_tool_errors"
    no_tool_errors: NoArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.no_tool_errors)


class FileExists(GraderEntry):
    """The workspace has a file at this path."""

    name = "file_exists"
    file_exists: str

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.file_exists, self.file_exists)


class FileAbsent(GraderEntry):
    """The workspace has no file at this path."""

    name = "file_absent"
    file_absent: str

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.file_absent, self.file_absent)


class FileContainsArgs(FileModel):
    """Arguments of `file_contains`: a path and `text` or `pattern`."""

    path: str
    text: Text | None = None
    pattern: str | None = None
    case_sensitive: bool = False


class FileContains(GraderEntry):
    """The workspace file contains the text, or matches the regular expression."""

    name = "file_contains"
    file_contains: FileContainsArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.file_contains
        return self._make(
            ctx,
            path,
            graders.file_contains,
            a.path,
            a.text,
            pattern=a.pattern,
            case_sensitive=a.case_sensitive,
        )


class FileJsonArgs(Shorthand):
    """Arguments of `file_json`; `file_json: out.json` is the short form."""

    short_field = "path"
    path: str
    json_schema: dict[str, JsonValue] | None = Field(default=None, alias="schema")


class FileJson(GraderEntry):
    """The workspace file is JSON (matching the schema, when given)."""

    name = "file_json"
    file_json: FileJsonArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.file_json
        return self._make(ctx, path, graders.file_json, a.path, schema=a.json_schema)


class OnlyChanged(GraderEntry):
    """Every file the trial changed matches one of these globs."""

    name = "only_changed"
    only_changed: list[str]

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.only_changed, *self.only_changed)


class Unchanged(GraderEntry):
    """No file matching these globs changed."""

    name = "unchanged"
    unchanged: list[str] = Field(min_length=1)

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        return self._make(ctx, path, graders.unchanged, *self.unchanged)
