"""What building a suite from its file model needs: Python references and a problem list."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from trialkit.loaders.errors import FieldPath, Problem, format_path
from trialkit.loaders.python import TargetError
from trialkit.loaders.python import _import_file as import_file

Locator = Callable[[FieldPath], tuple[str, int | None, FieldPath]]
"""Where a field of the file model was written: `(file, line, path within that file)`."""


class UnresolvedReference(Exception):
    """A Python reference cannot be resolved; the message says why."""


class References:
    """Resolves `module:name` references with the suite's folder importable.

    A reference to a module that is a file of the suite's folder (`agent:answer` with an
    `agent.py` next to `suite.yaml`) imports that file under a name of its own, so two suites
    with an `agent.py` each never get each other's.
    """

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self._modules: dict[str, ModuleType] = {}

    def resolve(self, ref: str) -> Any:
        module_part, _, attr = ref.rpartition(":")
        module = self._module(module_part)
        value: Any = module
        for part in attr.split("."):
            if not hasattr(value, part):
                raise UnresolvedReference(f"{ref}: {module_part} has no attribute {attr!r}")
            value = getattr(value, part)
        return value

    def _module(self, name: str) -> ModuleType:
        if name not in self._modules:
            self._modules[name] = self._import(name)
        return self._modules[name]

    def _import(self, name: str) -> ModuleType:
        folder = str(self.base_dir.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)  # like a Python target: the suite's files import
        local = self.base_dir / name if name.endswith(".py") else self.base_dir / f"{name}.py"
        if name.endswith(".py") or ("." not in name and local.is_file()):
            if not local.is_file():
                raise UnresolvedReference(f"{name}: no such file in {self.base_dir}")
            try:
                return import_file(local.resolve())
            except TargetError as exc:
                raise UnresolvedReference(str(exc)) from None
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                raise UnresolvedReference(
                    f"{name}: no such module (looked in {self.base_dir} and on sys.path)"
                ) from None
            raise UnresolvedReference(f"{name}: import failed: {exc}") from None
        except Exception as exc:
            raise UnresolvedReference(
                f"{name}: import failed: {type(exc).__name__}: {exc}"
            ) from None


@dataclass
class BuildContext:
    """Collects problems while a file model becomes runtime objects, and resolves references.

    `locate` turns a path in the model into the file, line and field the user wrote.
    """

    refs: References
    locate: Locator
    problems: list[Problem] = field(default_factory=list)

    def problem(self, path: FieldPath, message: str) -> None:
        file, line, shown = self.locate(path)
        self.problems.append(Problem(file, line, format_path(shown), message))

    def resolve(self, path: FieldPath, ref: str) -> Any | None:
        """The object `ref` names, or `None` after recording why it cannot be had."""
        try:
            return self.refs.resolve(ref)
        except UnresolvedReference as exc:
            self.problem(path, str(exc))
            return None

    def elsewhere(self, locate: Locator) -> BuildContext:
        """The same build, reporting through another locator (e.g. a row of a data file)."""
        return BuildContext(self.refs, locate, self.problems)
