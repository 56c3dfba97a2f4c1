"""Which loader a target is for, told from its path alone: no loader is imported for it.

A Python target (`suite.py:suite`) then never loads the suite-file models, whose schemas cost
a run's start about 0.14 s.
"""

from __future__ import annotations

from pathlib import Path

SUITE_FILE_SUFFIXES = (".yaml", ".yml", ".json")
"""The suffixes of suite files (a folder of them is a suite target too)."""


def is_suite_target(target: str | Path) -> bool:
    """Whether `target` is for the suite-file loader: a folder, or a `.yaml` / `.yml` /
    `.json` file."""
    path = Path(target)
    return path.is_dir() or path.suffix.lower() in SUITE_FILE_SUFFIXES
