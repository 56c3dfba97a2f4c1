"""One entry point for every TARGET `trialkit run` and `trialkit validate` accept."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trialkit.models.base import Model
    from trialkit.task import Suite


def load_target(target: str, *, model: str | Model | None = None) -> Suite:
    """The suite TARGET names, tried in this order:

    1. another tool's file, by prefix (`evals:`, `inspect:`, `promptfoo:`, `hf:`) or by its
       shape (a promptfoo config, openai/evals samples, inspect_ai samples);
    2. a suite folder or a suite file (`.yaml`, `.yml`, `.json`);
    3. Python: `path.py`, `path.py:name` or `package.module:name`.

    `model` (only when given on the command line) replaces an imported file's own model.
    """
    from trialkit.loaders.importers import load_import_target
    from trialkit.loaders.python import load_suite
    from trialkit.loaders.suite_file import is_suite_target, load_suite_file

    imported = load_import_target(target, model=model)
    if imported is not None:
        return imported
    if is_suite_target(target):
        return load_suite_file(target)
    return load_suite(target)
