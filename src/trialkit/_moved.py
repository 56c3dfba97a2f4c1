"""Import paths of modules that moved, kept working for one release with a warning.

The pieces of a run moved from the top of the package into `trialkit.run` in 0.2 (the
changelog lists them). `import trialkit.settings` still gives the module, now
`trialkit.run.settings`, and warns once that the old path goes in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

# Old dotted path -> where the module lives now.
MOVED = {
    "trialkit.adaptive": "trialkit.run.adaptive",
    "trialkit.matrix": "trialkit.run.matrix",
    "trialkit.preflight": "trialkit.run.preflight",
    "trialkit.progress": "trialkit.run.progress",
    "trialkit.regrade": "trialkit.run.regrade",
    "trialkit.rerun": "trialkit.run.rerun",
    "trialkit.retries": "trialkit.run.retries",
    "trialkit.run_trial": "trialkit.run.trial",
    "trialkit.runner": "trialkit.run.runner",
    "trialkit.runner_session": "trialkit.run.session",
    "trialkit.settings": "trialkit.run.settings",
    "trialkit.tally": "trialkit.run.tally",
    "trialkit._writer": "trialkit.run._writer",
}


class _MovedLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; the old import path goes in trialkit 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        # The module itself, not a copy: both names see the same objects and state.
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported under its new name."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader())


def install() -> None:
    """Let the old paths import (once per process)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
