"""The layout rules of DESIGN §3, kept by the tests: no import cycle between modules of
`trialkit`, and no module over 600 lines.

An import counts wherever it is written (at the top, inside a function, under `try`), since a
function-level import is still a dependency; only an import under `if TYPE_CHECKING:` does not,
as it never runs. A package's `__init__` is the module named by the package. Importing
`a.b.c` counts as an import of `a.b.c` alone, not of the packages above it. Imports by a
string (`importlib.import_module`, the lazy exports of `trialkit._lazy`) are not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "trialkit"
MAX_LINES = 600


@dataclass(frozen=True)
class Edge:
    """`source` imports `target`, first at `file:line`."""

    source: str
    target: str
    file: Path
    line: int


def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` (a folder under `root`) by its dotted name."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING`, however `typing` was imported (`typing.TYPE_CHECKING` too)."""
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` that can run: the bodies of `if TYPE_CHECKING:` left out."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            branches: list[ast.stmt] = child.orelse
        elif (
            isinstance(child, ast.If)
            and isinstance(child.test, ast.UnaryOp)
            and isinstance(child.test.op, ast.Not)
            and _type_checking(child.test.operand)
        ):
            branches = child.body
        else:
            yield child
            yield from _runtime_nodes(child)
            continue
        for statement in branches:
            yield statement
            yield from _runtime_nodes(statement)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """`name` if it is a module, else the nearest package above it that is one."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The modules of `modules` that module `name` (at `path`) imports, with the line of each
    import, in the order written."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := _known(alias.name, modules)) is not None:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in modules else _known(base, modules)
                if target is not None:
                    yield target, node.lineno


def import_edges(modules: dict[str, Path]) -> dict[str, dict[str, Edge]]:
    """For each module, the modules it imports, each with the first line that does."""
    edges: dict[str, dict[str, Edge]] = {}
    for name, path in modules.items():
        mine = edges.setdefault(name, {})
        for target, line in imports_of(name, path, modules):
            if target != name and target not in mine:
                mine[target] = Edge(name, target, path, line)
    return edges


def strongly_connected(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without
    recursion), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, {})))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def import_cycles(root: Path, package: str) -> list[str]:
    """One message per import cycle among the modules of `package`: its modules, and the
    import line of each of its edges (cut one of them to break it)."""
    modules = modules_of(root, package)
    graph = import_edges(modules)
    messages = []
    for component in strongly_connected(graph):
        inside = set(component)
        lines = [
            f"  {edge.file.relative_to(root.parent)}:{edge.line}: {edge.source} imports "
            f"{edge.target}"
            for source in component
            for edge in sorted(graph[source].values(), key=lambda e: e.line)
            if edge.target in inside
        ]
        messages.append(
            f"import cycle between {len(component)} modules: {', '.join(component)}\n"
            + "\n".join(lines)
        )
    return messages


def long_modules(root: Path, limit: int = MAX_LINES) -> list[str]:
    """`file: N lines` for each Python file under `root` over `limit` lines."""
    over = []
    for path in sorted(root.rglob("*.py")):
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > limit:
            over.append(f"{path.relative_to(root.parent)}: {count} lines (at most {limit})")
    return over


# --- the rules, on the real tree ----------------------------------------------------------------


def test_no_import_cycle_between_modules() -> None:
    cycles = import_cycles(SRC, PACKAGE)
    assert not cycles, (
        "modules that depend on each other (move what both need to where it belongs; an "
        "import inside a function still counts):\n" + "\n".join(cycles)
    )


def test_no_module_over_600_lines() -> None:
    over = long_modules(SRC)
    assert not over, "split these modules along their seams:\n" + "\n".join(over)


# --- the checker itself, on small packages ----------------------------------------------------


def make_package(root: Path, files: dict[str, str]) -> Path:
    """A package `pkg` under `root` with `files` (paths relative to `pkg/`)."""
    for relative, text in files.items():
        path = root / "pkg" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for folder in [root / "pkg", *(root / "pkg").rglob("*")]:
        if folder.is_dir() and not (folder / "__init__.py").exists():
            (folder / "__init__.py").write_text("", encoding="utf-8")
    return root


def test_a_cycle_of_three_modules_is_found_with_each_import_line(tmp_path: Path) -> None:
    root = make_package(
        tmp_path / "src",
        {
            "a.py": "import os\nfrom pkg import b\n",
            "b.py": "from pkg.sub.c import thing\n",
            "sub/c.py": "thing = 1\n\n\nimport pkg.a\n",
            "d.py": "from pkg import a\n",  # depends on the cycle, is not part of it
        },
    )
    [message] = import_cycles(root, "pkg")
    assert message.splitlines() == [
        "import cycle between 3 modules: pkg.a, pkg.b, pkg.sub.c",
        "  src/pkg/a.py:2: pkg.a imports pkg.b",
        "  src/pkg/b.py:1: pkg.b imports pkg.sub.c",
        "  src/pkg/sub/c.py:4: pkg.sub.c imports pkg.a",
    ]


def test_an_import_inside_a_function_counts(tmp_path: Path) -> None:
    root = make_package(
        tmp_path,
        {
            "report.py": "from pkg.render import render\n",
            "render.py": (
                "def render(report):\n"
                "    try:\n"
                "        from .report import Report\n"
                "    except ImportError:\n"
                "        return None\n"
                "    return Report\n"
            ),
        },
    )
    [message] = import_cycles(root, "pkg")
    assert "pkg/render.py:3: pkg.render imports pkg.report" in message
    assert "pkg/report.py:1: pkg.report imports pkg.render" in message


def test_an_import_for_type_checking_only_is_no_cycle(tmp_path: Path) -> None:
    root = make_package(
        tmp_path,
        {
            "a.py": "from pkg.b import B\n",
            "b.py": (
                "import typing\n"
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.a import A\n"
                "if typing.TYPE_CHECKING:\n"
                "    import pkg.a\n"
                "else:\n"
                "    import json\n"
                "if not TYPE_CHECKING:\n"
                "    import os\n"
                "else:\n"
                "    from . import a\n"
                "import typing as t\n"
                "def f():\n"
                "    if t.TYPE_CHECKING:\n"
                "        from .a import A\n"
                "class B: ...\n"
            ),
        },
    )
    assert import_cycles(root, "pkg") == []
    # The same import where it runs is one.
    (root / "pkg" / "b.py").write_text("from pkg.a import A\n", encoding="utf-8")
    assert len(import_cycles(root, "pkg")) == 1


def test_relative_imports_and_packages_are_resolved(tmp_path: Path) -> None:
    root = make_package(
        tmp_path,
        {
            "__init__.py": "from pkg.run.runner import Runner\n",
            "run/__init__.py": "",
            "run/runner.py": "from .. import task\nfrom ..task import Task\nRunner = 1\n",
            "task.py": "from . import Name\n",  # a name of the package: its __init__
        },
    )
    [message] = import_cycles(root, "pkg")
    assert message.splitlines()[0] == (
        "import cycle between 3 modules: pkg, pkg.run.runner, pkg.task"
    )
    assert "pkg/run/runner.py:1: pkg.run.runner imports pkg.task" in message
    assert "pkg/task.py:1: pkg.task imports pkg" in message


def test_two_separate_cycles_are_two_messages(tmp_path: Path) -> None:
    root = make_package(
        tmp_path,
        {
            "a.py": "import pkg.b\n",
            "b.py": "import pkg.a\n",
            "c.py": "def f():\n    import pkg.d\n",
            "d.py": "def g():\n    import pkg.c\n",
            "e.py": "import pkg.a, pkg.c\n",
        },
    )
    cycles = import_cycles(root, "pkg")
    assert [m.splitlines()[0] for m in cycles] == [
        "import cycle between 2 modules: pkg.a, pkg.b",
        "import cycle between 2 modules: pkg.c, pkg.d",
    ]


@pytest.mark.parametrize(("lines", "over"), [(600, False), (601, True)])
def test_a_module_over_600_lines_is_named_with_its_count(
    tmp_path: Path, lines: int, over: bool
) -> None:
    root = make_package(tmp_path, {"big.py": "x = 1\n" * lines, "small.py": "y = 2\n"})
    expected = [f"pkg/big.py: {lines} lines (at most 600)"] if over else []
    assert long_modules(root / "pkg") == expected
