"""What holds in every install on its own: each of its modules imports, the command starts,
and the environment holds that install alone (so a test here cannot pass on a package that
another extra or the `dev` extra brought)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from pathlib import Path

import trialkit as installed_package
from tests.installs.areas import EXTRAS_INSIDE, modules_of
from tests.installs.helpers import INSTALL_VAR, said, trialkit

INSTALL = "*"

PROBES = {
    "openai": "openai",
    "anthropic": "anthropic",
    "postgres": "psycopg",
    "otel": "opentelemetry-sdk",
    "mcp": "mcp",
    "stats": "scipy",
    "ray": "ray",
    "hf": "datasets",
    "view": "jinja2",
    "dev": "pytest-xdist",
}
"""A distribution only that install brings, for each install."""


def installed() -> str:
    return os.environ[INSTALL_VAR]


def test_every_module_of_the_install_imports() -> None:
    package = Path(installed_package.__file__).parent  # the installed copy
    names = [n for n in modules_of(installed(), package) if not n.endswith("__main__")]
    failed = {}
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # every failure at once, each with its reason
            failed[name] = f"{type(exc).__name__}: {exc}"
    assert failed == {}
    assert len(names) > 100


def test_the_environment_holds_this_install_alone() -> None:
    kept = {installed(), *EXTRAS_INSIDE.get(installed(), ())}
    present = {extra for extra, name in PROBES.items() if extra not in kept and has(name)}
    assert present == set(), f"installed beside {installed()}: {sorted(present)}"
    assert all(has(PROBES[extra]) for extra in kept if extra in PROBES)


def has(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_the_command_starts(tmp_path: Path) -> None:
    done = trialkit("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("trialkit"), said(done)
    done = trialkit("runs", cwd=tmp_path)
    assert done.returncode == 2 and "no store" in done.stderr.lower() + done.stdout.lower(), said(
        done
    )
