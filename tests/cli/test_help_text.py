"""What `--help` prints reads as written: no format escapes left in, no doubled plurals."""

from __future__ import annotations

import click
import pytest

from trialkit.cli.main import cli


def commands() -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = [("trialkit", cli)]
    group = click.Context(cli, info_name="trialkit")
    for name in cli.list_commands(group):
        command = cli.get_command(group, name)
        assert command is not None
        found.append((f"trialkit {name}", command))
        if isinstance(command, click.Group):
            inner = click.Context(command, info_name=name, parent=group)
            for sub in command.list_commands(inner):
                subcommand = command.get_command(inner, sub)
                assert subcommand is not None
                found.append((f"trialkit {name} {sub}", subcommand))
    return found


@pytest.mark.parametrize(
    ("name", "command"), commands(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_help_has_no_escapes_left(name: str, command: click.Command) -> None:
    text = command.get_help(click.Context(command, info_name=name))
    assert "%%" not in text
    assert "harnesss" not in text
