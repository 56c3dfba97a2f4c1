"""`trialkit sandbox check` and `trialkit sandbox cleanup` from the command line."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from tests.sandbox._bwrap import bwrap_provider
from trialkit.cli.main import cli
from trialkit.sandbox import registry
from trialkit.sandbox.bwrap import BwrapProvider


class Leaky(BwrapProvider):
    """bwrap that shows the host's /tmp to the sandbox, while claiming isolation."""

    name = "leaky"

    def __init__(self, **options: Any) -> None:
        super().__init__(read_write=["/tmp"], **options)


def test_an_unknown_provider_is_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(cli, ["sandbox", "check", "bwarp"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: no sandbox provider 'bwarp' (known: bwrap, docker, local, podman); "
        "did you mean 'bwrap'?"
    ]


def test_a_provider_that_cannot_run_here_is_exit_2_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(BwrapProvider, "executable", None)
    result = CliRunner().invoke(cli, ["sandbox", "check", "bwrap"])
    assert result.exit_code == 2
    assert "apt-get install bubblewrap" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_check_bwrap_prints_the_markdown_table_and_exits_0() -> None:
    bwrap_provider()
    result = CliRunner().invoke(cli, ["sandbox", "check", "bwrap", "--markdown"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "| canary | bwrap |"
    assert "| secret file outside | held |" in lines
    assert "| setsid, double fork | held |" in lines


def test_a_claimed_canary_that_breaks_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap_provider()
    monkeypatch.setitem(registry.BUILTIN, "leaky", f"{__name__}:Leaky")
    result = CliRunner().invoke(cli, ["sandbox", "check", "leaky"])
    assert result.exit_code == 1, result.output
    assert "leaky: write-outside: broken: wrote /tmp/trialkit-canary-" in result.output


def test_cleanup_of_bwrap_and_local_says_what_it_removed() -> None:
    bwrap_provider()
    result = CliRunner().invoke(cli, ["sandbox", "cleanup", "local"])
    assert (result.exit_code, result.output) == (0, "local: removed 0\n")
    result = CliRunner().invoke(cli, ["sandbox", "cleanup", "bwrap"])
    assert result.exit_code == 0 and result.output.startswith("bwrap: removed ")
