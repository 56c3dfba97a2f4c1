"""Write docs/cli.md from the commands' own --help, so the reference never drifts.

python scripts/gen_cli_docs.py          # rewrite docs/cli.md
python scripts/gen_cli_docs.py --check  # exit 1 if docs/cli.md is stale (tests run this)
"""

# The exit-code table in HEADER is Markdown: a row is wider than a line of code.
# ruff: noqa: E501

from __future__ import annotations

import sys
from pathlib import Path

import click

from trialkit.cli.main import cli
from trialkit.run.options import OPTIONS, Option

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
CONFIGURATION = DOC.parent / "configuration.md"
"""Its table of every setting, between these two lines, is made here too."""
TABLE_START = "<!-- settings table: made by scripts/gen_cli_docs.py -->\n"
TABLE_END = "<!-- end of the settings table -->\n"

HEADER = """# Command-line reference

Generated from `trialkit --help` by `scripts/gen_cli_docs.py`; do not edit by hand.

Every command prints expected errors as one line on standard error (`--debug` shows the
traceback). Exit codes of `trialkit run`:

| code | meaning |
|---|---|
| 0 | the gate passed |
| 1 | the gate failed: a regression task did not pass, or the pass rate is under `--min-pass-rate` |
| 2 | bad usage or a bad suite: nothing ran (an empty task selection is exit 2) |
| 3 | more trials errored than `--fail-on-error` allows (default: none) |
| 4 | the run could not finish: the store (a full disk, a table gone, a database stopped) or the worker processes failed mid-run; one line names what failed and why, the trials that finished are stored, and `trialkit run TARGET --resume RUN` continues |
| 130 | interrupted: the trials that finished are stored |

When both apply, 3 wins over 1: a run whose trials errored cannot be trusted to have passed.
"""


SETTINGS_HEADER = """## Settings

Every option of `trialkit run` is declared once (`trialkit.run.options`); this table is made from
those declarations. A setting is looked up in one order: its flag, then its environment variable,
then (under pytest) its `trialkit_*` ini key, then its key in `[tool.trialkit]` of the nearest
`pyproject.toml` (from the working directory up to the repository's root), then its default.
Options without a variable or a key (report files, `--resume`, `--task`, ...) belong to one run
and are flags only. See docs/configuration.md.

"""
TABLE_HEAD = """| setting | flag | env var | `[tool.trialkit]` key | pytest | suite file | default | commands |
|---|---|---|---|---|---|---|---|
"""


def _cell(text: str | None) -> str:
    """Code in a table cell (its `|` escaped, as GitHub and MkDocs read tables)."""
    return f"`{text}`".replace("|", "\\|") if text else "—"


def _suite(option: Option) -> str:
    """The suite file's field of the same meaning, and which of the two wins."""
    if option.suite is None:
        return "—"
    return f"`{option.suite}` ({'wins' if option.suite_wins else 'overridden'})"


def settings_table(options: tuple[Option, ...] | None = None) -> str:
    """The section of docs/cli.md: how settings are looked up, and the table."""
    return SETTINGS_HEADER + TABLE_HEAD + settings_rows(options)


def settings_rows(options: tuple[Option, ...] | None = None) -> str:
    """One row a setting: where it may be set, its default and the commands that take it."""
    rows = []
    for option in OPTIONS if options is None else options:
        flag = option.cli_flag + (f" {option.metavar}" if option.metavar else "")
        pytest = f"`{option.pytest_flag}`, `{option.ini}`" if option.pytest else "—"
        default = option.default_text or (
            None if option.default in (None, False, ()) else str(option.default)
        )
        commands = (
            "every command with `--store`"
            if "*" in option.commands
            else (", ".join(option.commands) or "pytest only")
        )
        rows.append(
            f"| {option.name} | {_cell(flag) if option.commands else '—'} | {_cell(option.env)} "
            f"| {_cell(option.key if option.pyproject else None)} | {pytest} | {_suite(option)} "
            f"| {default or '—'} | {commands} |"
        )
    return "\n".join(rows) + "\n"


def render() -> str:
    parts = [HEADER, settings_table()]
    root = click.Context(cli, info_name="trialkit", terminal_width=100, max_content_width=100)
    parts.append(f"## trialkit\n\n```text\n{cli.get_help(root)}\n```\n")
    for name in sorted(cli.commands):  # type: ignore[attr-defined]
        command = cli.commands[name]  # type: ignore[attr-defined]
        ctx = click.Context(
            command, info_name=name, parent=root, terminal_width=100, max_content_width=100
        )
        parts.append(f"## trialkit {name}\n\n```text\n{command.get_help(ctx)}\n```\n")
    return "\n".join(parts)


def with_table(page: str) -> str:
    """docs/configuration.md with its settings table made again."""
    before, found, rest = page.partition(TABLE_START)
    _, end, after = rest.partition(TABLE_END)
    if not (found and end):
        raise SystemExit(f"{CONFIGURATION}: the lines {TABLE_START!r} and {TABLE_END!r} are gone")
    return before + TABLE_START + "\n" + TABLE_HEAD + settings_rows() + "\n" + TABLE_END + after


def main() -> None:
    made = {DOC: render()}
    if CONFIGURATION.exists():
        made[CONFIGURATION] = with_table(CONFIGURATION.read_text(encoding="utf-8"))
    if "--check" in sys.argv:
        for path, text in made.items():
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"{path} is stale: run python scripts/gen_cli_docs.py", file=sys.stderr)
                sys.exit(1)
        return
    for path, text in made.items():
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
