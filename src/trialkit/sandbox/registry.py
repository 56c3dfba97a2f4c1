"""Sandbox providers by name: the built-in ones and those other packages declare in the
`trialkit.sandboxes` entry point group (`name = "package.module:ProviderClass"`)."""

from __future__ import annotations

import difflib
import importlib
from importlib.metadata import entry_points
from typing import Any

from trialkit.sandbox.base import SandboxError, SandboxProvider

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "load_provider", "provider_names"]

ENTRY_POINT_GROUP = "trialkit.sandboxes"
BUILTIN: dict[str, str] = {
    "local": "trialkit.sandbox.local:LocalProvider",
    "bwrap": "trialkit.sandbox.bwrap:BwrapProvider",
    "docker": "trialkit.sandbox.docker:DockerProvider",
    "podman": "trialkit.sandbox.docker:PodmanProvider",
}
"""Also declared as entry points in pyproject.toml; listed here so a source checkout that was
not installed finds them too."""


def _declared() -> dict[str, str]:
    found = dict(BUILTIN)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, point.value)
    return found


def provider_names() -> list[str]:
    """Every provider name known here, sorted."""
    return sorted(_declared())


def load_provider(name: str, **options: Any) -> SandboxProvider:
    """The provider called `name`, made with `options`; `SandboxError` (one line) when no
    provider has that name or its module cannot be imported."""
    declared = _declared()
    target = declared.get(name)
    if target is None:
        close = difflib.get_close_matches(name, declared, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise SandboxError(
            f"no sandbox provider {name!r} (known: {', '.join(sorted(declared))}){hint}"
        )
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SandboxError(
            f"sandbox provider {name!r}: cannot import {module_name}: {exc}"
        ) from exc
    cls = getattr(module, attribute, None)
    if not (isinstance(cls, type) and issubclass(cls, SandboxProvider)):
        raise SandboxError(f"sandbox provider {name!r}: {target} is not a SandboxProvider class")
    return cls(**options)
