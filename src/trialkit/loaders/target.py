"""One entry point for every TARGET `trialkit run` and `trialkit validate` accept."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trialkit.models.base import Model
    from trialkit.task import Suite


@dataclass(frozen=True)
class SuiteSource:
    """How to load a suite again: what `load_target` was given, and where it ran.

    Worker processes (`Runner(workers=N)`) rebuild the suite from this instead of receiving
    it: suites hold functions (agents, graders, probes), which are never pickled.
    """

    target: str
    model: str | None = None
    """The `model` given to `load_target` (the command line's `--model`), if any."""
    cwd: str = ""
    """The working directory `target` was relative to."""


def load_target(target: str, *, model: str | Model | None = None) -> Suite:
    """The suite TARGET names, tried in this order:

    1. another tool's file, by prefix (`evals:`, `inspect:`, `promptfoo:`, `hf:`) or by its
       shape (a promptfoo config, openai/evals samples, inspect_ai samples);
    2. a suite folder or a suite file (`.yaml`, `.yml`, `.json`);
    3. Python: `path.py`, `path.py:name` or `package.module:name`.

    `model` (only when given on the command line) replaces an imported file's own model.
    The suite's `source` records the target, so worker processes can load it again.
    """
    from trialkit.loaders.importers import load_import_target
    from trialkit.loaders.paths import is_suite_target

    imported = load_import_target(target, model=model)
    if imported is not None:
        suite = imported
    elif is_suite_target(target):
        from trialkit.loaders.suite_file import load_suite_file

        suite = load_suite_file(target)
    else:
        from trialkit.loaders.python import load_suite

        suite = load_suite(target)
    if model is None or isinstance(model, str):  # a Model object cannot be given to a worker
        suite.source = SuiteSource(target=target, model=model, cwd=os.getcwd())
    return suite
