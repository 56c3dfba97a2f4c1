"""The one declaration of each run setting: a setting added there is a flag of `trialkit run`,
a pytest option and ini key, a key of `[tool.trialkit]`, an environment variable and a row of
docs/cli.md; and the declarations agree with what reads them."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest
from click.testing import CliRunner

from tests.run.fake_option import register, run_command_with_fake
from trialkit.cli.main import cli
from trialkit.run.options import OPTIONS, Choice, Option
from trialkit.run.rerun import RERUN_CHOICES
from trialkit.run.settings import RunSettings
from trialkit.run.sources import key_lines

ROOT = Path(__file__).resolve().parents[2]
SUITE_PY = """
from trialkit import Suite, Task, graders

suite = Suite(id="knob", kind="regression", harness=lambda prompt: prompt,
              tasks=[Task(id="a", input="paris", graders=[graders.contains("paris")])])
"""


def gen_cli_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[click.Command, list[tuple[Any, str]]]]:
    seen = register(monkeypatch)
    for command in run_command_with_fake(monkeypatch):
        yield command, seen


def test_a_declared_setting_is_a_flag_a_variable_a_key_and_a_row_of_the_docs(
    fake: tuple[click.Command, list[tuple[Any, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command, seen = fake
    runner = CliRunner()
    help_text = runner.invoke(command, ["--help"], terminal_width=200).output
    assert "--fake-knob N" in help_text
    assert "A knob only the tests have. [default: 7; env TRIALKIT_FAKE_KNOB]" in help_text

    (tmp_path / ".git").mkdir()
    (tmp_path / "suite.py").write_text(SUITE_PY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRIALKIT_FAKE_KNOB", raising=False)
    args = ["suite.py", "--no-progress", "-q", "--store", str(tmp_path / "store.db")]

    def run(*more: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
        done = runner.invoke(command, [*args, *more], env=env)
        assert done.exit_code == 0, done.output
        return seen[-1]

    assert run() == (7, "--fake-knob")
    (tmp_path / "pyproject.toml").write_text("[tool.trialkit]\nfake-knob = 5\n")
    assert run() == (5, "pyproject.toml:2: [tool.trialkit] fake-knob")
    assert run(env={"TRIALKIT_FAKE_KNOB": "6"}) == (6, "TRIALKIT_FAKE_KNOB")
    assert run("--fake-knob", "8", env={"TRIALKIT_FAKE_KNOB": "6"}) == (8, "--fake-knob")

    (tmp_path / "pyproject.toml").write_text("[tool.trialkit]\nfake-knob = 0\n")
    done = runner.invoke(command, args)
    assert done.exit_code == 2
    assert done.output.strip().endswith(
        "error: pyproject.toml:2: [tool.trialkit] fake-knob: expected a whole number >= 1, got 0"
    )

    docs = gen_cli_docs()
    row = next(line for line in docs.settings_table().splitlines() if "fake_knob" in line)
    assert row == (
        "| fake_knob | `--fake-knob N` | `TRIALKIT_FAKE_KNOB` | `fake-knob` "
        "| `--trialkit-fake-knob`, `trialkit_fake_knob` | — | 7 | run |"
    )
    assert "--fake-knob N" in docs.render()


def test_the_docs_are_made_from_the_declarations() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert gen_cli_docs().settings_table() in text
    for option in OPTIONS:
        if option.commands:
            assert option.cli_flag in text


def test_each_setting_has_its_variable_and_each_keyword_reaches_run_settings() -> None:
    keywords = set(inspect.signature(RunSettings.parse).parameters) | {
        f.name for f in dataclasses.fields(RunSettings)
    }
    for option in OPTIONS:
        if option.pyproject:
            assert option.env == "TRIALKIT_" + option.name.upper(), option.name
        if option.settings:
            assert option.name in keywords, option.name
        if option.pytest:
            assert option.pyproject, f"{option.name}: a pytest option is a [tool.trialkit] key too"
    names = [option.name for option in OPTIONS]
    assert len(names) == len(set(names))
    schema = json.loads((ROOT / "src" / "trialkit" / "schemas" / "suite.schema.json").read_text())
    for option in OPTIONS:
        if option.suite is not None:
            assert option.suite in schema["properties"], option.name


def test_only_takes_the_verdicts_rerun_knows() -> None:
    only = next(option for option in OPTIONS if option.name == "only")
    assert isinstance(only.kind, Choice) and only.kind.choices == RERUN_CHOICES


def test_commands_that_share_a_setting_take_it_from_the_declaration() -> None:
    ctx = click.Context(cli)
    for option in OPTIONS:
        for name in option.commands:
            if name == "*":
                continue
            command = cli.get_command(ctx, name)
            assert command is not None
            flags = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
            assert option.cli_flag in flags, (name, option.cli_flag)
    for name in ("runs", "report", "compare", "plan", "regrade", "view"):
        command = cli.get_command(ctx, name)
        assert command is not None
        assert any("--store" in p.opts for p in command.params if isinstance(p, click.Option))


def test_key_lines_finds_each_key_of_the_table_only() -> None:
    text = (
        '[project]\nname = "x"\n\n[ tool . "trialkit" ]  # settings\n'
        'trials = 3\n"cache-mode" = "replay"\n\n[tool.other]\nmodel = "no"\n'
        "[[tool.trialkit.list]]\nname = 'no'\n[tool.trialkit.retries]\nmost = 3\n"
    )
    assert key_lines(text) == {"trials": 5, "cache-mode": 6, "retries": 12}


def test_a_setting_the_plugin_does_not_take_is_still_a_known_key(tmp_path: Path) -> None:
    from trialkit.run.sources import find_project

    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.trialkit]\nmax_cost = 2.5\nworkers = 2\n")
    project = find_project(tmp_path / "deeper" / "still")
    max_cost = next(o for o in OPTIONS if o.name == "max_cost")
    given = project.get(max_cost)
    assert given is not None and given.value == 2.5
    assert given.where.endswith("pyproject.toml:2: [tool.trialkit] max-cost")


def test_option_help_names_its_default_and_variable() -> None:
    option = Option("x", "Help.", default=3, env="TRIALKIT_X")
    assert option.help_of("run") == "Help. [default: 3; env TRIALKIT_X]"
    narrower = Option("x", "Help.", help_for={"regrade": "Narrower."})
    assert (narrower.help_of("run"), narrower.help_of("regrade")) == ("Help.", "Narrower.")


def test_every_value_of_the_table_is_checked_whoever_reads_it(tmp_path: Path) -> None:
    from trialkit.run.settings import SettingsError
    from trialkit.run.sources import find_project

    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.trialkit]\ntrials = 2\nstrict_capability = 'yes'\n"
    )
    with pytest.raises(SettingsError) as raised:
        find_project(tmp_path)
    assert str(raised.value).endswith(
        "pyproject.toml:3: [tool.trialkit] strict-capability: expected true or false, got 'yes'"
    )
