"""Load a suite from Python: `path.py`, `path.py:name` or `package.module:name`."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from trialkit.task import Suite, SuiteError


class TargetError(Exception):
    """The target cannot be loaded; the message says what to fix (exit 2)."""


def load_suite(target: str) -> Suite:
    """The `Suite` that `target` names.

    `path.py` alone works when the file defines exactly one Suite; `:name` picks an attribute,
    which may be a Suite or a function with no arguments that returns one.
    """
    module_part, _, attr = _split(target)
    module = _import(module_part)
    if attr:
        if not hasattr(module, attr):
            raise TargetError(f"{target}: {module_part} has no attribute {attr!r}")
        return _as_suite(getattr(module, attr), target)
    suites = [v for v in vars(module).values() if isinstance(v, Suite)]
    unique = list({id(s): s for s in suites}.values())
    if len(unique) == 1:
        return unique[0]
    if not unique:
        raise TargetError(
            f"{target}: defines no trialkit.Suite at module level; "
            "name a suite or a function that returns one with path.py:name"
        )
    names = sorted(k for k, v in vars(module).items() if isinstance(v, Suite))
    raise TargetError(
        f"{target}: defines {len(unique)} suites ({', '.join(names)}); pick one with "
        f"{module_part}:NAME"
    )


def suite_names(module_part: str) -> list[str]:
    """The names of the `Suite`s that the Python file or module `module_part` defines at
    module level, in the file's order; a second name of the same suite is left out."""
    module = _import(module_part)
    seen: set[int] = set()
    names = []
    for name, value in vars(module).items():
        if isinstance(value, Suite) and id(value) not in seen:
            seen.add(id(value))
            names.append(name)
    return names


def _split(target: str) -> tuple[str, str, str]:
    # A Windows drive letter ("C:\\x.py") is not a separator; a trailing ":name" is.
    head, sep, tail = target.rpartition(":")
    if sep and tail and "/" not in tail and "\\" not in tail and len(head) > 1:
        return head, sep, tail
    return target, "", ""


def _import(module_part: str) -> ModuleType:
    is_path = module_part.endswith(".py") or "/" in module_part or "\\" in module_part
    if is_path:
        path = Path(module_part)
        if not path.is_file():
            raise TargetError(f"{module_part}: no such file")
        return _import_file(path.resolve())
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # like `python -m`: modules of the project folder import
    try:
        return importlib.import_module(module_part)
    except ModuleNotFoundError as exc:
        if exc.name and module_part.startswith(exc.name):
            raise TargetError(
                f"{module_part}: no such module (and no file {module_part}); "
                "give a path to a .py file, or a module importable from here"
            ) from None
        raise TargetError(f"{module_part}: import failed: {exc}") from exc
    except Exception as exc:
        try:
            spec = importlib.util.find_spec(module_part)
        except (ImportError, ValueError):
            spec = None
        where = spec.origin if spec is not None and spec.origin else module_part
        raise TargetError(_import_failure(where, exc)) from exc


def _import_failure(path: str, exc: BaseException) -> str:
    """`path:line: what went wrong`, with the line of `path` the error came from: a suite's
    own mistake (`SuiteError`, `ValueError`) is said as it is, anything else with its type."""
    line = _line_in(path, exc)
    where = f"{path}:{line}" if line else path
    if isinstance(exc, SyntaxError):
        return f"{where}: {exc.msg}"
    if isinstance(exc, SuiteError | ValueError | TypeError):
        return f"{where}: {exc}"
    return f"{where}: import failed: {type(exc).__name__}: {exc}"


def _line_in(path: str, exc: BaseException) -> int | None:
    """The line of `path` where `exc` was raised, or the deepest call from `path` on its way."""
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename) == Path(path):
        return exc.lineno
    found = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if Path(frame.f_code.co_filename) == Path(path):
            found = line
    return found


def _import_file(path: Path) -> ModuleType:
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"trialkit_target_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # so the file can import its neighbours
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise TargetError(_import_failure(str(path), exc)) from exc
    return module


def _as_suite(value: object, target: str) -> Suite:
    if isinstance(value, Suite):
        return value
    if callable(value):
        try:
            made = value()
        except Exception as exc:
            raise TargetError(f"{target}: calling it raised {type(exc).__name__}: {exc}") from exc
        if isinstance(made, Suite):
            return made
        raise TargetError(f"{target}: returned {type(made).__name__}, not a trialkit.Suite")
    raise TargetError(f"{target}: is a {type(value).__name__}, not a trialkit.Suite")
