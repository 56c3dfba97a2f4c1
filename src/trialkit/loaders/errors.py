"""Problems found in suite files: each names the file, the line when known, and the field."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trialkit.task import SuiteError

FieldPath = tuple[str | int, ...]
"""Where a value sits in a document: `("tasks", 2, "graders", 0, "contains")`."""


def format_path(path: Sequence[str | int]) -> str:
    """`tasks[2].graders[0].contains` for `("tasks", 2, "graders", 0, "contains")`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a suite: `file:line: field: message`."""

    file: str
    """The file, as the user named it (relative paths stay relative)."""
    line: int | None
    """1-based line number, when known."""
    field: str
    """Where in the document, e.g. `tasks[2].graders[0].contains`; empty for the whole file."""
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class SuiteFileError(SuiteError):
    """A suite file (or folder) has problems; `problems` lists every one that was found."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = list(problems)
        if not self.problems:
            raise ValueError("SuiteFileError needs at least one problem")
        super().__init__("\n".join(str(p) for p in self.problems))
