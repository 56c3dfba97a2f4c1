"""Re-exports that a package imports on first use, so importing the package stays cheap."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, origins: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's module-level `__getattr__` and `__dir__` for the names in `origins`.

    `origins` maps each name to the module it comes from; a name that is a subpackage of
    `package` maps to that subpackage. A name is imported when first asked for, then kept in
    the package's namespace, so later lookups are plain attribute reads.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:
        origin = origins.get(name)
        if origin is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(origin)
        value = module if origin == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *origins})

    return __getattr__, __dir__
