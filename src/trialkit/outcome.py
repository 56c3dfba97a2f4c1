"""The outcome of a trial: the final output and the final state of the world."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trialkit._record import Record

OUTCOME_SCHEMA_VERSION = 1


class FileChange(Record):
    """One file that a trial added, modified or deleted."""

    path: str
    """Relative to the workspace root, with `/` separators."""
    change: Literal["added", "modified", "deleted"]
    binary: bool = False
    diff: str | None = None
    """A unified diff for text files (cut at the size cap)."""
    truncated: bool = False
    size: int | None = None
    """The file's size after the trial (before it, for a deleted file)."""


class WorkspaceDiff(Record):
    """What changed in a workspace during a trial."""

    files: list[FileChange] = Field(default_factory=list)

    def changed(self, change: str | None = None) -> list[FileChange]:
        return [f for f in self.files if change is None or f.change == change]

    @property
    def added(self) -> list[str]:
        return [f.path for f in self.changed("added")]

    @property
    def modified(self) -> list[str]:
        return [f.path for f in self.changed("modified")]

    @property
    def deleted(self) -> list[str]:
        return [f.path for f in self.changed("deleted")]


class Artifact(Record):
    """A file a trial produced, kept for graders and reviewers."""

    path: str
    content: str | None = None
    """Text content, when the file is text and under the size cap."""
    size: int = 0
    media_type: str | None = None


class Outcome(Record):
    """The final output and the state of the world after a trial."""

    schema_version: int = OUTCOME_SCHEMA_VERSION
    output: str | None = None
    """The agent's final answer (its last turn's output)."""
    failed: bool = False
    """True when the agent raised or reported failure. For `expect: failure` tasks this is what
    the graders check; for other tasks a reported failure fails the trial (a raise errors it)."""
    failure: str | None = None
    """The agent's failure message, when `failed`."""
    state: dict[str, Any] = Field(default_factory=dict)
    """Facts about the world captured by the environment."""
    artifacts: list[Artifact] = Field(default_factory=list)
    diff: WorkspaceDiff | None = None
    """What changed in the workspace, when the environment has one."""
