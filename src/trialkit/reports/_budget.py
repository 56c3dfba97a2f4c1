"""Fitting a Markdown document into a size limit by cutting its least important rows.

GitHub refuses a job summary (`$GITHUB_STEP_SUMMARY`) over 1 MiB and a PR comment over 65,536
characters. A document is a list of parts; a `Section`'s rows each have a rank (lower is more
important). When everything does not fit, rows are kept in order of rank (then of position)
for as long as they fit; the rest are cut, a section left with no row is dropped with its
heading, and a note at the end says what was cut and where to read it all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

STEP_SUMMARY_LIMIT = 1_048_576
"""GitHub's limit of a job summary (`$GITHUB_STEP_SUMMARY`), in bytes."""
PR_COMMENT_LIMIT = 65_536
"""GitHub's limit of an issue or pull request comment's body, in characters."""
NOTE_RESERVE = 600
"""Room kept for the note of what was cut."""

Measure = Callable[[str], int]


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass
class Row:
    lines: list[str]
    rank: int = 0


@dataclass
class Section:
    """A heading (`head`), rows, and closing lines (`tail`, e.g. `</details>`)."""

    what: tuple[str, str]
    """What a row is, singular and plural (for the note): ("failing task", "failing tasks")."""
    head: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)


Part = list[str] | Section


def fit(
    parts: Sequence[Part],
    limit: int | None,
    *,
    measure: Measure = utf8_bytes,
    where: str = "the JSON or HTML report",
) -> str:
    """The document `parts` make, within `limit` (as `measure` counts it) when it can be."""
    text = _render(parts, None)
    if limit is None or measure(text) < limit:
        return text
    fixed = sum(measure(line) + 1 for part in parts for line in _fixed_lines(part))
    room = limit - fixed - NOTE_RESERVE
    candidates = [
        (row.rank, s, r, measure("\n".join(row.lines)) + 1)
        for s, part in enumerate(parts)
        if isinstance(part, Section)
        for r, row in enumerate(part.rows)
    ]
    kept: set[tuple[int, int]] = set()
    for _, s, r, size in sorted(candidates):
        if size > room:
            break
        room -= size
        kept.add((s, r))
    text = _render(parts, kept)
    cut = _cut_counts(parts, kept)
    if cut:
        text += "\n" + _note(cut, where) + "\n"
    return text


def _fixed_lines(part: Part) -> list[str]:
    return part if isinstance(part, list) else [*part.head, *part.tail]


def _render(parts: Sequence[Part], kept: set[tuple[int, int]] | None) -> str:
    lines: list[str] = []
    for s, part in enumerate(parts):
        if isinstance(part, list):
            lines += part
            continue
        rows = [row for r, row in enumerate(part.rows) if kept is None or (s, r) in kept]
        if part.rows and not rows:
            continue
        lines += part.head
        for row in rows:
            lines += row.lines
        lines += part.tail
    return "\n".join(lines) + "\n"


def _cut_counts(parts: Sequence[Part], kept: set[tuple[int, int]]) -> dict[tuple[str, str], int]:
    cut: dict[tuple[str, str], int] = {}
    for s, part in enumerate(parts):
        if isinstance(part, Section):
            n = sum((s, r) not in kept for r in range(len(part.rows)))
            if n:
                cut[part.what] = cut.get(part.what, 0) + n
    return cut


def _note(cut: dict[tuple[str, str], int], where: str) -> str:
    shown = [f"{n:,} more {one if n == 1 else many}" for (one, many), n in cut.items()]
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return f"_… {listed} not shown (cut to fit GitHub's size limit): see {where}._"
