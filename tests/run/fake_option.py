"""A setting declared in one place only, for the tests that see it everywhere it should be."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest

import trialkit.cli.run
from trialkit.cli.main import cli
from trialkit.run import options as declared
from trialkit.run.options import Option, Whole
from trialkit.run.settings import RunSettings

FAKE = Option(
    "fake_knob",
    "A knob only the tests have.",
    Whole(1),
    default=7,
    env="TRIALKIT_FAKE_KNOB",
    metavar="N",
    pytest=True,
    pyproject=True,
    settings=True,
)


def register(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str]]:
    """Declare FAKE; each `RunSettings.parse` records (its value, where it came from) and
    builds the settings without it (no field of the record holds it)."""
    monkeypatch.setattr(declared, "OPTIONS", (*declared.OPTIONS, FAKE))
    seen: list[tuple[Any, str]] = []
    parse = RunSettings.parse.__func__  # type: ignore[attr-defined]

    def recording(cls: type[RunSettings], **values: Any) -> RunSettings:
        names = values.get("option_names") or {}
        seen.append((values.pop("fake_knob", None), names.get("fake_knob", "")))
        return parse(cls, **values)  # type: ignore[no-any-return]

    monkeypatch.setattr(RunSettings, "parse", classmethod(recording))
    return seen


def run_command_with_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`trialkit run` made again with FAKE declared (and made again without it afterwards)."""
    command = importlib.reload(trialkit.cli.run).run_command
    monkeypatch.setitem(cli.commands, "run", command)  # type: ignore[attr-defined]
    try:
        yield command
    finally:
        monkeypatch.undo()
        importlib.reload(trialkit.cli.run)
