"""Which of trialkit's modules belong to which install: the core (`pip install trialkit`), or
the extra that brings what the module imports. Read by `tests/test_dependencies.py` (every
third-party import is declared by the core or by the module's extra) and by the install tests
(every module of an install imports in an environment that holds only that install).

Standard library only: the install tests read it in environments without the `dev` extra.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "trialkit"
"""trialkit's source, where the modules are read from (the install tests import the installed
copy of the same modules)."""

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "openai": ("models/openai.py",),
    "anthropic": ("models/anthropic.py",),
    "local": ("models/local.py",),
    "postgres": (),  # SQLAlchemy loads psycopg for a postgresql+psycopg:// store URL
    "otel": ("exporters/otel.py", "exporters/_spans.py"),
    "langfuse": ("exporters/langfuse.py",),
    "mcp": ("harness/mcp.py",),
    "stats": ("analysis/_deps.py", "analysis/agreement.py"),
    "ray": ("executors/ray.py", "executors/ray_cassette.py", "executors/ray_runtime.py"),
    "hf": ("loaders/importers/huggingface.py",),
    "view": ("view/",),
}
"""The modules (paths under src/trialkit; a folder ends with `/`) whose imports an extra
provides. Every other module is the core's."""

EXTRAS_INSIDE: dict[str, tuple[str, ...]] = {"langfuse": ("otel",), "local": ("openai",)}
"""Extras that install others (`langfuse = ["trialkit[otel]"]`): their modules come too."""

HOST_MODULES: dict[str, tuple[str, ...]] = {"pytest": ("pytest_plugin/",)}
"""Modules that only a host program loads, which brings what they import: the pytest plugin
is loaded by pytest (an entry point), never by trialkit itself."""


def area_of(relative: str) -> str:
    """The install a module belongs to (`core`, an extra, or a host such as `pytest`), by its
    path under src/trialkit."""
    for name, patterns in (*EXTRA_MODULES.items(), *HOST_MODULES.items()):
        for pattern in patterns:
            if relative == pattern or (pattern.endswith("/") and relative.startswith(pattern)):
                return name
    return "core"


def module_files(package: Path = PACKAGE) -> dict[str, str]:
    """Every module of trialkit (in `package`: its source by default), by dotted name, with
    its path under the package's folder."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        parts = ["trialkit", *relative[: -len(".py")].split("/")]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = relative
    return found


def modules_of(install: str, package: Path = PACKAGE) -> list[str]:
    """The modules an environment holding `install` (`core` or an extra) can import: the
    core's, the extra's and those of the extras it installs."""
    areas = {"core", "pytest", install, *EXTRAS_INSIDE.get(install, ())}
    files = module_files(package)
    return [name for name, relative in files.items() if area_of(relative) in areas]
