"""The `trialkit` command: a group of thin commands over the library.

Each command's module is imported only when that command is looked up (to run it, or to show
its own help), so `trialkit --version`, `trialkit --help` and each command pay only for what
they use. `trialkit --help` lists the commands from the table below.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from gettext import gettext
from typing import Any, NamedTuple

import click

from trialkit._version import __version__

EXIT_INTERRUPTED = 130
"""As `trialkit.cli._common.EXIT_INTERRUPTED` (not imported: starting `trialkit` stays light)."""


class LazyCommand(NamedTuple):
    module: str
    attribute: str
    summary: str
    """What `trialkit --help` shows: the command's `short_help`, or else the first sentence of
    its docstring (a test keeps the two the same)."""


COMMANDS: Mapping[str, LazyCommand] = {
    "agreement": LazyCommand(
        "trialkit.cli.agreement",
        "agreement_command",
        "Krippendorff's alpha of the judges of run RUN over its trials.",
    ),
    "cache": LazyCommand(
        "trialkit.cli.cache",
        "cache_command",
        "Inspect and tidy a cassette folder (the DIR given to `run --cache`).",
    ),
    "calibrate": LazyCommand(
        "trialkit.cli.calibrate",
        "calibrate_command",
        "Compare a judge's scores with human labels on the same trials.",
    ),
    "compare": LazyCommand(
        "trialkit.cli.compare",
        "compare_command",
        "Compare runs of a suite, stored or saved as JSON report files.",
    ),
    "export": LazyCommand(
        "trialkit.cli.export",
        "export_command",
        "Export the stored run RUN (an id, a unique id prefix, or a run name: its latest run).",
    ),
    "health": LazyCommand(
        "trialkit.cli.health",
        "health_command",
        "Assess a suite's tasks over its last runs, whatever model ran them.",
    ),
    "labels": LazyCommand(
        "trialkit.cli.labels",
        "labels_command",
        "Export a run's labels (or its pending reviews) to a file, or import labels from one.",
    ),
    "plan": LazyCommand(
        "trialkit.cli.plan",
        "plan_command",
        "How many tasks and trials a comparison needs to detect a change of pass rate.",
    ),
    "regrade": LazyCommand(
        "trialkit.cli.regrade",
        "regrade_command",
        "Score the stored run RUN again with its suite's current graders, without running the "
        "agent.",
    ),
    "report": LazyCommand(
        "trialkit.cli.report",
        "report_command",
        "Render the stored run RUN (an id, a unique id prefix, or a run name: its latest run).",
    ),
    "review": LazyCommand(
        "trialkit.cli.review",
        "review_command",
        "Label the trials of RUN that wait for a human reviewer, one at a time.",
    ),
    "run": LazyCommand(
        "trialkit.cli.run",
        "run_command",
        "Run the suite TARGET: a suite folder or file (.yaml, .json), another tool's file "
        "(a promptfoo config, openai/evals or inspect_ai samples; or prefixed evals:, inspect:, "
        "promptfoo:, hf:), or Python (path.py, path.py:name, package.module:name).",
    ),
    "runs": LazyCommand(
        "trialkit.cli.runs",
        "runs_command",
        "List stored runs (RUN elsewhere: an id, a unique id prefix, or a run name).",
    ),
    "sandbox": LazyCommand(
        "trialkit.cli.sandbox",
        "sandbox_command",
        "Check what the sandbox providers hold against, and remove what killed runs left.",
    ),
    "transcripts": LazyCommand(
        "trialkit.cli.transcripts",
        "transcripts_command",
        "List trials, show one trial's transcript, or compare a task's trial in two runs.",
    ),
    "validate": LazyCommand(
        "trialkit.cli.validate",
        "validate_command",
        "Check the suite TARGET without running it: a suite folder, a suite file (.yaml, .yml, "
        ".json), another tool's file (promptfoo config, openai/evals or inspect_ai samples; or "
        "prefixed evals:, inspect:, promptfoo:, hf:), or path.py[:name].",
    ),
    "view": LazyCommand(
        "trialkit.cli.view",
        "view_command",
        "Serve a web viewer of the store until Ctrl-C: the runs, each run's report, every "
        "trial's transcript, transcript diffs and comparisons of runs, the same as JSON under "
        "/api/, and review forms that label trials (on loopback, unless --read-only).",
    ),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported from its module when first looked up.

    Names, `in` and iteration import nothing; getting a command (`[name]`, `.get`, `.values`)
    imports its module. So click's own lookups, and code that walks `group.commands`, see
    every command as if it had been added up front.
    """

    def __init__(self, table: Mapping[str, LazyCommand]) -> None:
        self._entries: dict[str, LazyCommand | click.Command] = dict(table)

    def __getitem__(self, name: str) -> click.Command:
        entry = self._entries[name]
        if isinstance(entry, LazyCommand):
            command = getattr(importlib.import_module(entry.module), entry.attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{entry.module}.{entry.attribute} is not a click command")
            self._entries[name] = entry = command
        return entry

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def visible(self, name: str) -> bool:
        entry = self._entries[name]
        return isinstance(entry, LazyCommand) or not entry.hidden

    def short_help(self, name: str, limit: int) -> str:
        """What a group's help shows for `name`, shortened to `limit`; imports nothing."""
        entry = self._entries[name]
        if isinstance(entry, LazyCommand):
            return click.Command(name, help=entry.summary).get_short_help_str(limit)
        return entry.get_short_help_str(limit)


class LazyGroup(click.Group):
    """A click group whose commands are imported when used; its help lists them from `table`."""

    def __init__(self, *args: Any, table: Mapping[str, LazyCommand], **kwargs: Any) -> None:
        self.lazy_commands = LazyCommands(table)
        kwargs["commands"] = self.lazy_commands
        super().__init__(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a Ctrl-C before the command handles it itself (while its module is
        imported, its options parsed) ends as one later does: one line, exit 130 (click's
        default is "Aborted!" and exit 1)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [name for name in self.list_commands(ctx) if self.lazy_commands.visible(name)]
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)  # as click.Group's
        with formatter.section(gettext("Commands")):
            formatter.write_dl(
                [(name, self.lazy_commands.short_help(name, limit)) for name in names]
            )


@click.group(
    cls=LazyGroup,
    table=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name="trialkit")
def cli() -> None:
    """trialkit: run tasks against your agent several times, grade what it did, gate CI."""
    from trialkit.secrets import redact_standard_streams

    # No secret reaches the terminal or a CI log (DESIGN §4): standard output and error
    # redact, from here (no command, --help or --version imports this) to the end of the
    # process under `main`, which keeps them for the traceback of an unexpected error;
    # in-process callers of `cli` get their streams back when the command ends.
    restore = redact_standard_streams()
    if not _keep_redacting:
        click.get_current_context().call_on_close(restore)


_keep_redacting = False


def main() -> None:
    global _keep_redacting
    _keep_redacting = True
    try:
        cli(prog_name="trialkit")
    finally:
        # What the command leaves (a large run's reports and plans) is freed as the process
        # exits, without the collector walking it first: 0.2 s of a 10,000-task run's exit.
        # Every file the command wrote is closed already; exit handlers still run.
        gc.freeze()
