"""What starting `trialkit` imports: commands are imported when used, and `runs` stays light.

Each check runs the command in a fresh interpreter and lists the modules it imported; no
timings are asserted here (see benchmarks/cli_startup.py for those).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

import trialkit.cli
from tests.analysis._store_runs import write_run
from trialkit.cli.main import COMMANDS, cli
from trialkit.store import Store

# Run the command as the console script does, then print what it imported.
PROBE = """
import json, sys
from trialkit.cli.main import main
sys.argv = ["trialkit", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

NOT_FOR_RUNS = [
    "trialkit.run.runner",
    "trialkit.harness",
    "trialkit.loaders.suite_file",
    "trialkit.reports.html",
    "trialkit.reports.markdown",
    "trialkit.reports.junit",
    "trialkit.analysis",
    "trialkit.view",
    "openai",
    "anthropic",
    "httpx",
    "yaml",
]


def imported_by(*args: str, cwd: Path | None = None) -> list[str]:
    """The modules `trialkit ARGS` imported, in a fresh interpreter; it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    modules: list[str] = report["modules"]
    return modules


def command_modules(modules: list[str]) -> list[str]:
    """The modules of commands among `modules`."""
    commands = {entry.module for entry in COMMANDS.values()}
    return [m for m in modules if m in commands]


def first_sentence(help_text: str) -> str:
    """The first sentence of the first paragraph, on one line: what click shortens."""
    words = help_text.split("\n\n", 1)[0].split()
    for end, word in enumerate(words, start=1):
        if word.endswith(".") and not word.endswith("..."):
            return " ".join(words[:end])
    return " ".join(words)


@pytest.mark.e2e
@pytest.mark.parametrize("option", ["--version", "--help", "-h"])
def test_version_and_help_import_no_command(option: str) -> None:
    modules = imported_by(option)
    assert command_modules(modules) == []
    assert [m for m in modules if m.startswith("trialkit.")] == [
        "trialkit._lazy",
        "trialkit._moved",
        "trialkit._version",
        "trialkit.cli",
        "trialkit.cli.main",
    ]


@pytest.mark.e2e
def test_a_commands_help_imports_that_command_only(tmp_path: Path) -> None:
    assert command_modules(imported_by("runs", "--help", cwd=tmp_path)) == ["trialkit.cli.runs"]


@pytest.mark.e2e
@pytest.mark.parametrize("with_a_run", [False, True], ids=["empty", "one run"])
def test_runs_imports_the_store_and_not_the_rest(tmp_path: Path, with_a_run: bool) -> None:
    url = f"sqlite:///{tmp_path}/trialkit.db"
    with Store(url) as store:
        if with_a_run:
            write_run(store, "r1", {"a": "PF"})
    modules = imported_by("runs", "--store", url, cwd=tmp_path)
    assert "trialkit.store" in modules
    assert command_modules(modules) == ["trialkit.cli.runs"]
    unwanted = [m for m in modules if any(m == n or m.startswith(f"{n}.") for n in NOT_FOR_RUNS)]
    assert unwanted == []


def test_the_table_names_every_command_module() -> None:
    found = {
        module.name
        for module in pkgutil.iter_modules(trialkit.cli.__path__)
        if not module.name.startswith("_") and module.name != "main"
    }
    assert sorted(found) == sorted(entry.module.rsplit(".", 1)[1] for entry in COMMANDS.values())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_table_summary_is_the_commands_own(name: str) -> None:
    entry = COMMANDS[name]
    command = getattr(importlib.import_module(entry.module), entry.attribute)
    assert isinstance(command, click.Command)
    assert command.name == name
    expected = command.short_help or first_sentence(command.help or "")
    assert entry.summary == expected
    for limit in (30, 45, 80, 200):
        assert cli.lazy_commands.short_help(name, limit) == command.get_short_help_str(limit)


def test_help_reads_the_same_as_with_every_command_loaded() -> None:
    eager = click.Group(
        name=cli.name,
        commands=[cli.commands[name] for name in COMMANDS],
        params=cli.params,
        help=cli.help,
        context_settings=cli.context_settings,
    )
    for width in (60, 80, 100):
        expected = eager.get_help(click.Context(eager, info_name="trialkit", terminal_width=width))
        fresh = type(cli)(
            name=cli.name,
            table=COMMANDS,
            params=cli.params,
            help=cli.help,
            context_settings=cli.context_settings,
        )
        lazy = click.Context(fresh, info_name="trialkit", terminal_width=width)
        assert fresh.get_help(lazy) == expected
