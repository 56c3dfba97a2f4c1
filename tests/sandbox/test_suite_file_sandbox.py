"""The suite file's `sandbox:` key: a command-line agent run in bwrap from a suite file, and a
sandbox that cannot be had refused before any trial (one line naming the file, line and key;
exit 2; nothing stored)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.sandbox._bwrap import bwrap_provider
from trialkit.cli.main import cli

LOOK = (
    "import json, os; print(json.dumps({'is_sandbox': os.environ.get('IS_SANDBOX'), "
    "'home': os.environ['HOME'], 'host': 'TRIALKIT_TEST_HOST_ONLY' in os.environ}))"
)


def suite(folder: Path, sandbox: str, harness: str | None = None) -> Path:
    folder.mkdir()
    command = json.dumps(["/usr/bin/python3", "-c", LOOK])
    (folder / "suite.yaml").write_text(
        "id: boxed\n"
        f"harness: {harness or '{command: ' + command + '}'}\n"
        f"sandbox: {sandbox}\n"
        "tasks:\n"
        '  - {id: t, input: x, graders: [{contains: \'"is_sandbox": "1"\'}]}\n',
        encoding="utf-8",
    )
    return folder


def test_a_suite_runs_its_agent_in_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap_provider()
    monkeypatch.setenv("TRIALKIT_TEST_HOST_ONLY", "1")
    folder = suite(tmp_path / "s", "{provider: bwrap, network: none, limits: {processes: 50}}")
    report = tmp_path / "report.json"
    store = f"sqlite:///{tmp_path / 'db.sqlite'}"
    result = CliRunner().invoke(
        cli, ["run", str(folder), "--no-progress", "--store", store, "--json", str(report)]
    )
    assert result.exit_code == 0, result.output
    (trial,) = json.loads(report.read_text())["tasks"][0]["results"]
    seen = json.loads(trial["output"])
    assert seen == {"is_sandbox": "1", "home": "/home/sandbox", "host": False}


@pytest.mark.parametrize(
    ("sandbox", "message"),
    [
        ("bwarp", "sandbox: no sandbox provider 'bwarp' (known: "),
        (
            "{provider: local, network: none}",
            "sandbox: sandbox 'local' cannot enforce network 'none' (agent)",
        ),
        (
            "{provider: local, network: host, limits: {memory_bytes: 1000000}}",
            "sandbox: sandbox 'local' cannot enforce limit 'memory'",
        ),
        (
            "{provider: bwrap, network: allowlist, allow: [example.com]}",
            "sandbox: network allow: 'example.com' is not host:port or a URL",
        ),
        ("{provider: local, limits: {memory_bytes: -1}}", "greater than 0"),
        ("{provider: local, limits: {processes: true}}", "sandbox.limits.processes"),
        ("7", "sandbox: expected a provider's name (bwrap) or a mapping"),
        (
            "{provider: bwrap, options: {read_only: /opt}}",
            "sandbox: sandbox 'bwrap': read_only: expected a list of paths, got '/opt'",
        ),
        (
            "{provider: bwrap, options: {read_only: [/]}}",
            "read_only: '/' is not an absolute path below /",
        ),
        ("{provider: bwrap, options: {readonly: [/opt]}}", "sandbox 'bwrap': no option readonly"),
    ],
)
def test_a_sandbox_that_cannot_be_had_is_refused_before_any_trial(
    tmp_path: Path, sandbox: str, message: str
) -> None:
    folder = suite(tmp_path / "s", sandbox)
    store = tmp_path / "db.sqlite"
    result = CliRunner().invoke(
        cli, ["run", str(folder), "--no-progress", "--store", f"sqlite:///{store}"]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "suite.yaml:3: sandbox" in result.output or "suite.yaml:3:" in result.output
    assert "Traceback" not in result.output
    assert not store.exists()


def test_a_suite_without_a_command_line_agent_gets_the_sandbox_itself(tmp_path: Path) -> None:
    from trialkit.loaders.suite_file.load import load_suite_file

    folder = suite(tmp_path / "s", "local", harness="{model: scripted/echo}")
    result = CliRunner().invoke(cli, ["validate", str(folder)])
    assert result.exit_code == 0, result.output
    loaded = load_suite_file(folder / "suite.yaml")
    assert loaded.chosen_sandbox is not None and loaded.chosen_sandbox[0].name == "local"


def test_the_sandbox_flag_puts_the_agent_in_a_sandbox(tmp_path: Path) -> None:
    bwrap_provider()
    folder = suite(tmp_path / "s", "local")  # the flag wins over the file
    report = tmp_path / "report.json"
    store = f"sqlite:///{tmp_path / 'db.sqlite'}"
    args = ["run", str(folder), "--no-progress", "--store", store, "--json", str(report)]
    result = CliRunner().invoke(cli, [*args, "--sandbox", "bwrap"])
    assert result.exit_code == 0, result.output
    (trial,) = json.loads(report.read_text())["tasks"][0]["results"]
    assert json.loads(trial["output"])["is_sandbox"] == "1"


@pytest.mark.parametrize(
    ("harness", "provider", "message"),
    [
        (None, "nosuch", "error: --sandbox: no sandbox provider 'nosuch'"),
        ("{model: scripted/echo}", "nosuch", "error: --sandbox: no sandbox provider 'nosuch'"),
    ],
)
def test_a_sandbox_flag_that_cannot_be_had_is_exit_2(
    tmp_path: Path, harness: str | None, provider: str, message: str
) -> None:
    folder = suite(tmp_path / "s", "local", harness=harness)
    if harness is not None:  # the suite's own sandbox, not its agent's
        (folder / "suite.yaml").write_text(
            (folder / "suite.yaml").read_text().replace("sandbox: local\n", "")
        )
    store = tmp_path / "db.sqlite"
    result = CliRunner().invoke(
        cli,
        [
            "run",
            str(folder),
            "--no-progress",
            "--store",
            f"sqlite:///{store}",
            "--sandbox",
            provider,
        ],
    )
    assert result.exit_code == 2, result.output
    assert message in result.output and not store.exists()
