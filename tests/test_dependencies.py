"""Every third-party module trialkit imports is declared where the importing code is installed:
by the core's dependencies, or by the extra that module belongs to (`tests/installs/areas.py`).

A package that only arrives through another one (`sniffio` through old anyio releases, numpy
through scipy, `opentelemetry.trace` through the SDK) is not declared: when that package
changes its own dependencies, trialkit breaks on a fresh install. An import inside `try:` with
an `except ImportError` (or `contextlib.suppress(ImportError)`) is optional: the code handles
its absence, so it needs no declaration. Imports under `if TYPE_CHECKING:` never run.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.installs.areas import (
    EXTRA_MODULES,
    EXTRAS_INSIDE,
    HOST_MODULES,
    PACKAGE,
    area_of,
    module_files,
)

PYPROJECT = PACKAGE.parents[1] / "pyproject.toml"
NEEDED_BY_LIBRARIES = {
    "view": {"python-multipart": "Starlette reads a form (the viewer's review form) only with it"}
}
"""What an extra's libraries need for the part of them trialkit uses, which they do not
install themselves: no import in trialkit shows it."""


@dataclass(frozen=True)
class Import:
    relative: str
    """The importing module's path under src/trialkit."""
    line: int
    module: str
    """The dotted name imported (`opentelemetry.trace`, `yaml`)."""
    optional: bool
    """Inside a `try` that handles ImportError: the code works without it."""

    def __str__(self) -> str:
        return f"src/trialkit/{self.relative}:{self.line}: {self.module}"


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def project() -> dict[str, list[str]]:
    """The requirements of the core (`""`) and of each extra, as written."""
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return {"": data["dependencies"], **data["optional-dependencies"]}


def declared(install: str) -> set[str]:
    """The distributions an install declares: the core's and, for an extra, its own and those
    of the `trialkit[...]` extras it names."""
    names: set[str] = set()
    todo, seen = ["", install], set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in project()[extra]:
            requirement = Requirement(line)
            if canonical(requirement.name) == "trialkit":
                todo += sorted(requirement.extras)
            else:
                names.add(canonical(requirement.name))
    return names


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    caught = handler.type
    elements = caught.elts if isinstance(caught, ast.Tuple) else [caught] if caught else []
    return any(isinstance(e, ast.Name) and e.id in names for e in elements)


def _suppresses_import_error(item: ast.withitem) -> bool:
    call = item.context_expr
    return (
        isinstance(call, ast.Call)
        and ast.unparse(call.func).endswith("suppress")
        and any(ast.unparse(a) in ("ImportError", "ModuleNotFoundError") for a in call.args)
    )


class _Imports(ast.NodeVisitor):
    def __init__(self, relative: str) -> None:
        self.relative = relative
        self.found: list[Import] = []
        self._guards = 0

    def _add(self, node: ast.AST, module: str) -> None:
        line = getattr(node, "lineno", 0)
        self.found.append(Import(self.relative, line, module, self._guards > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            for alias in node.names:
                self._add(node, f"{node.module}.{alias.name}")

    def visit_Call(self, node: ast.Call) -> None:
        name = ast.unparse(node.func)
        if (
            name in ("importlib.import_module", "import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            self._add(node, node.args[0].value)
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        if ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        guarded = any(_catches_import_error(h) for h in node.handlers)
        self._guards += guarded
        for statement in node.body:
            self.visit(statement)
        self._guards -= guarded
        for statement in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(statement)

    def visit_With(self, node: ast.With) -> None:
        guarded = any(_suppresses_import_error(item) for item in node.items)
        self._guards += guarded
        self.generic_visit(node)
        self._guards -= guarded


def third_party_imports() -> list[Import]:
    found: list[Import] = []
    for relative in module_files().values():
        visitor = _Imports(relative)
        visitor.visit(ast.parse((PACKAGE / relative).read_text(encoding="utf-8")))
        found += [
            i
            for i in visitor.found
            if (top := i.module.split(".")[0]) not in sys.stdlib_module_names and top != "trialkit"
        ]
    return found


@cache
def _top_level() -> dict[str, list[str]]:
    return {k: sorted(set(v)) for k, v in packages_distributions().items()}


@cache
def _files(dist: str) -> tuple[str, ...]:
    return tuple(str(f) for f in distribution(dist).files or ())


def distributions_of(module: str) -> set[str]:
    """The distributions that provide `module` here; for a namespace package spread over
    several (`opentelemetry`), those that hold the module's own files. A module not installed
    here is taken to come from the distribution of its name (`ray`)."""
    parts = module.split(".")
    candidates = _top_level().get(parts[0])
    if not candidates:
        return {canonical(parts[0])}
    if len(candidates) > 1:
        for length in range(len(parts), 1, -1):
            path = "/".join(parts[:length])
            holding = {
                d
                for d in candidates
                if any(f.startswith(f"{path}/") or f == f"{path}.py" for f in _files(d))
            }
            if holding:
                return {canonical(d) for d in holding}
    return {canonical(d) for d in candidates}


def test_every_third_party_import_is_declared_where_its_code_is_installed() -> None:
    hosts = {name: {canonical(name)} for name in HOST_MODULES}
    found = third_party_imports()
    undeclared = []
    for imported in found:
        if imported.optional:
            continue
        area = area_of(imported.relative)
        allowed = declared("" if area in ("core", *hosts) else area) | hosts.get(area, set())
        providers = distributions_of(imported.module)
        if not providers & allowed:
            where = "the core's dependencies" if area == "core" else f"the {area!r} extra"
            undeclared.append(f"{imported} (from {', '.join(sorted(providers))}): not in {where}")
    assert undeclared == []
    # the scan sees what it must: imports of the core and of extras, and optional ones
    required = {i.module.split(".")[0] for i in found if not i.optional}
    assert {"anyio", "pydantic", "sqlalchemy", "starlette", "uvicorn", "mcp"} <= required
    assert any(i.optional for i in found)


def test_the_import_scan_tells_required_optional_and_type_only_imports(tmp_path: Path) -> None:
    source = """
from typing import TYPE_CHECKING
import contextlib
import importlib
import sniffio
if TYPE_CHECKING:
    import never_at_run_time
try:
    import brotli
except ImportError:
    import fallback_after_failure
with contextlib.suppress(ImportError):
    import numpy
def later():
    from opentelemetry import trace
    return importlib.import_module("datasets")
"""
    visitor = _Imports("example.py")
    visitor.visit(ast.parse(source))
    assert [(i.module, i.optional) for i in visitor.found] == [
        ("typing.TYPE_CHECKING", False),
        ("contextlib", False),
        ("importlib", False),
        ("sniffio", False),
        ("brotli", True),
        ("fallback_after_failure", False),
        ("numpy", True),
        ("opentelemetry.trace", False),
        ("datasets", False),
    ]


def test_a_namespace_package_is_told_apart_by_its_files() -> None:
    assert distributions_of("opentelemetry.trace.Span") == {"opentelemetry-api"}
    assert distributions_of("opentelemetry.sdk.trace.TracerProvider") == {"opentelemetry-sdk"}
    assert distributions_of("yaml.safe_load") == {"pyyaml"}
    assert distributions_of("no_such_module_here") == {"no-such-module-here"}


def test_an_extra_includes_the_core_and_the_extras_it_names() -> None:
    assert "pydantic" in declared("") and "openai" not in declared("")
    assert {"pydantic", "openai", "llama-cpp-python"} <= declared("local")
    assert "opentelemetry-sdk" in declared("langfuse")


@pytest.mark.parametrize("extra", sorted(NEEDED_BY_LIBRARIES))
def test_an_extra_declares_what_its_libraries_need_for_what_trialkit_uses(extra: str) -> None:
    missing = {k: v for k, v in NEEDED_BY_LIBRARIES[extra].items() if k not in declared(extra)}
    assert missing == {}


def test_the_areas_name_real_extras_and_real_modules() -> None:
    extras = set(project()) - {""}
    assert set(EXTRA_MODULES) | set(EXTRAS_INSIDE) <= extras
    assert extras - set(EXTRA_MODULES) == {"all", "dev", "docs", "frameworks"}
    for patterns in (*EXTRA_MODULES.values(), *HOST_MODULES.values()):
        for pattern in patterns:
            assert (PACKAGE / pattern).exists(), pattern
    for extra, inside in EXTRAS_INSIDE.items():
        assert {f"trialkit[{','.join(inside)}]"} <= set(project()[extra])


def test_the_docs_extra_declares_what_mkdocs_yml_uses_each_with_a_range() -> None:
    """The `docs` extra alone builds the site: every package mkdocs.yml names (the theme, the
    plugins, the `pymdownx` Markdown extensions) is in it, each with an upper bound."""
    config = (PYPROJECT.parent / "mkdocs.yml").read_text(encoding="utf-8")
    needed = {"mkdocs"}
    if re.search(r"^\s+name: material\s*$", config, re.MULTILINE):
        needed.add("mkdocs-material")
    if "pymdownx." in config:
        needed.add("pymdown-extensions")
    if re.search(r"^\s+- mkdocstrings:", config, re.MULTILINE):
        needed |= {"mkdocstrings", "mkdocstrings-python"}
    assert needed - declared("docs") == set()
    for line in project()["docs"]:
        assert any(s.operator == "<" for s in Requirement(line).specifier), line
