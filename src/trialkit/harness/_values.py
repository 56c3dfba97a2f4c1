"""The values of a trial that a command-line agent puts in its requests and that a replay in
another folder, on another machine or another day sees differently, with the placeholders
that stand for them in cassette keys and recordings.

Claude Code's system prompt holds the working folder, its home folder (a memory path under
`~/.claude/projects/<folder with each non-alphanumeric character as "-">`), the date ("Today's
date is 2026-12-02", "The current month is December 2026") and the kernel's release ("OS
Version: Linux 6.1.0-18-amd64"); Codex's holds the folder, its home (`CODEX_HOME`), the date and
the time zone (`<timezone>Etc/UTC</timezone>`). Each becomes a placeholder when a request is
keyed or recorded and is put back, as the replaying trial sees it, in a replayed answer.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
from pathlib import Path

WORKSPACE_SLUG = "{{trialkit.workspace_slug}}"
HOME = "{{trialkit.home}}"
DATE = "{{trialkit.date}}"
MONTH = "{{trialkit.month}}"
OS_RELEASE = "{{trialkit.os_release}}"
TIMEZONE = "{{trialkit.timezone}}"

_NOT_ALPHANUMERIC = re.compile(r"[^A-Za-z0-9]")


def agent_values(workspace: Path, home: Path | None, timezone: str | None) -> list[tuple[str, str]]:
    """(value, placeholder) pairs for a command-line agent's trial, the workspace itself left
    to the trial (`run_trial.per_trial_values`). `timezone` is the agent's `TZ`."""
    pairs: list[tuple[str, str]] = []
    for folder in _spellings(workspace):
        pairs.append((_NOT_ALPHANUMERIC.sub("-", folder), WORKSPACE_SLUG))
    if home is not None:
        pairs += [(folder, HOME) for folder in _spellings(home)]
    today = _today(timezone)
    pairs.append((today.isoformat(), DATE))
    pairs.append((today.strftime("%B %Y"), MONTH))  # English month names: the C locale's
    release = platform.release()
    if len(release) >= 3 and any(c.isdigit() for c in release):
        pairs.append((release, OS_RELEASE))
    zone = (timezone or "").lstrip(":")
    if "/" in zone and not zone.startswith("/"):  # an IANA name is distinctive, "UTC" a word
        pairs.append((zone, TIMEZONE))  # (and ":/etc/localtime" names a file, not a zone)
    return pairs


def _spellings(path: Path) -> set[str]:
    return {str(path), os.path.realpath(path)}


def _today(timezone: str | None) -> datetime.date:
    """Today as the agent sees it: in its `TZ` when that names a zone, else local time."""
    if timezone:
        try:
            from zoneinfo import ZoneInfo

            return datetime.datetime.now(ZoneInfo(timezone.lstrip(":"))).date()
        except (ValueError, OSError, KeyError):
            pass
    return datetime.date.today()
