"""Helpers: write a suite folder from a mapping of relative paths to file contents."""

from __future__ import annotations

import textwrap
from pathlib import Path

from trialkit.loaders.errors import Problem, SuiteFileError
from trialkit.loaders.suite_file import load_suite_file


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return folder


def problems_of(folder: Path) -> list[str]:
    """The problems of a suite, as lines with the folder's path left out."""
    try:
        load_suite_file(folder)
    except SuiteFileError as exc:
        return [_relative(p, folder) for p in exc.problems]
    raise AssertionError("the suite loaded without problems")


def _relative(problem: Problem, folder: Path) -> str:
    return str(problem).removeprefix(f"{folder}/")
