"""A notes agent: a model with five tools over a small notes folder (the trial's workspace).

The notes folder has an `index.md` listing the areas (Health, Work, Home) and one folder per
area under `Areas/`. The agent files a journal entry as a note: it reads the index, writes the
note under the right area, and links it from the index.
"""

from __future__ import annotations

import re
from pathlib import Path

from trialkit.harness import GiveUp, ToolAgent, TrialContext

SYSTEM = """You file journal entries as notes in a notes folder.
1. Call read_index to see the areas.
2. Call write_note with path `Areas/<Area>/<YYYY-MM-DD> <Title>.md` and the entry as the text.
3. Call link_note to link the note from the index (and from any other note you are asked to).
If the entry cannot be filed as asked (for example the area does not exist), call give_up
with the reason instead of writing anything. Answer with one sentence saying what you did."""


def _folder(ctx: TrialContext) -> Path:
    return Path(ctx.world.path)


def _inside(ctx: TrialContext, path: str) -> Path:
    target = (_folder(ctx) / path).resolve()
    if not target.is_relative_to(_folder(ctx).resolve()):
        raise ValueError(f"{path} is outside the notes folder")
    return target


def read_index(ctx: TrialContext) -> str:
    """Read the notes index: the areas and the notes linked from each."""
    return (_folder(ctx) / "index.md").read_text()


def read_note(ctx: TrialContext, path: str) -> str:
    """Read a note.

    Args:
        path: The note's path, e.g. Areas/Health/README.md.
    """
    return _inside(ctx, path).read_text()


def write_note(ctx: TrialContext, path: str, text: str) -> str:
    """Write a new note. Existing notes are never overwritten.

    Args:
        path: Where: Areas/<Area>/<YYYY-MM-DD> <Title>.md
        text: The note's Markdown text.
    """
    match = re.fullmatch(r"Areas/([^/]+)/[^/]+\.md", path)
    if match is None:
        raise ValueError("notes go under Areas/<Area>/ and end in .md")
    if not (_folder(ctx) / "Areas" / match.group(1)).is_dir():
        raise ValueError(f"there is no area {match.group(1)!r}; see the index")
    target = _inside(ctx, path)
    if target.exists():
        raise FileExistsError(f"{path} already exists")
    target.write_text(text if text.endswith("\n") else text + "\n")
    return f"wrote {path}"


def link_note(ctx: TrialContext, path: str, into: str = "index.md") -> str:
    """Link a note from the index (under its area's heading) or from another note (at its end).

    Args:
        path: The note to link, e.g. Areas/Health/2026-11-28 Sleep.md.
        into: The note that gets the link; the index by default.
    """
    if not _inside(ctx, path).is_file():
        raise FileNotFoundError(f"{path} does not exist; write it first")
    target = _inside(ctx, into)
    link = f"- [[{path.removesuffix('.md')}]]"
    lines = target.read_text().splitlines()
    area = path.split("/")[1] if path.startswith("Areas/") else None
    heading = f"## {area}"
    if into == "index.md" and area is not None and heading in lines:
        end = lines.index(heading) + 1
        while end < len(lines) and lines[end].startswith("- "):
            end += 1
        lines.insert(end, link)
    else:
        lines.append(link)
    target.write_text("\n".join(lines) + "\n")
    return f"linked {path} from {into}"


def give_up(reason: str) -> str:
    """Say that the entry cannot be filed as asked, and why. Nothing is written.

    Args:
        reason: What makes the request impossible.
    """
    raise GiveUp(reason)


TOOLS = [read_index, read_note, write_note, link_note, give_up]


agent = ToolAgent(tools=TOOLS, system=SYSTEM, max_turns=8)
"""The agent under test. Without a model of its own it uses the trial's: the suite's, else
`--model` / `TRIALKIT_MODEL`."""
