"""`trialkit sandbox check [PROVIDER]` and `trialkit sandbox cleanup [PROVIDER]`."""

from __future__ import annotations

from collections.abc import Sequence

import click

from trialkit.cli._common import (
    EXIT_GATE_FAILED,
    EXIT_RUN_FAILED,
    debug_option,
    fail,
    handle_errors,
)


@click.group("sandbox")
def sandbox_command() -> None:
    """Check what the sandbox providers hold against, and remove what killed runs left."""


@sandbox_command.command("check")
@click.argument("providers", metavar="[PROVIDER]...", nargs=-1)
@click.option("--markdown", is_flag=True, help="Print the table as Markdown (for the docs).")
@debug_option
@handle_errors
def check_command(providers: tuple[str, ...], markdown: bool, debug: bool) -> None:
    """Run the canaries against each PROVIDER (default: every provider known here) and print a
    provider x canary table: a secret file outside the workspace, writes outside it, the
    network (a host service on 127.0.0.1, another address, the model proxy's URL), the host's
    environment and processes, a setsid or double-forked child, a fork bomb, a memory hog,
    the output cap, the wall clock, CPU time.

    "held": the provider claims it and it held; "BROKEN": it claims it and it did not;
    "not claimed": the provider does not claim it (a fork bomb or memory hog is then not run).
    Exit 1 when a claimed canary broke or errored; exit 2 when a PROVIDER named is unknown or
    cannot run here (the line says how to install it).
    """
    import anyio

    from trialkit.sandbox.base import SandboxError
    from trialkit.sandbox.check import check_provider, markdown_table
    from trialkit.sandbox.registry import load_provider, provider_names

    named = bool(providers)
    reports = []
    for name in providers or provider_names():
        try:
            loaded = load_provider(name)
        except SandboxError as exc:
            if named:
                fail(str(exc))
            click.echo(f"{name}: {exc}", err=True)
            continue
        report = anyio.run(check_provider, loaded)
        if named and report.unavailable is not None:
            fail(report.unavailable)
        reports.append(report)
    if markdown:
        click.echo(markdown_table(reports), nl=False)
    else:
        _print(reports)
    for report in reports:
        if report.unavailable is not None:
            click.echo(f"{report.provider}: unavailable: {report.unavailable}", err=True)
    failed = [(r.provider, c) for r in reports for c in r.failed]
    for name, result in failed:
        click.echo(f"{name}: {result.name}: {result.status}: {result.detail}", err=True)
    if failed:
        raise SystemExit(EXIT_GATE_FAILED)


def _print(reports: Sequence[object]) -> None:
    from trialkit.cli._common import stdout_console
    from trialkit.reports._table import Column, print_table
    from trialkit.sandbox.check import CANARIES, ProviderReport

    shown = [r for r in reports if isinstance(r, ProviderReport)]
    columns = [Column("canary"), *(Column(r.provider) for r in shown)]
    rows = []
    for spec in CANARIES:
        row = [spec.title]
        for report in shown:
            if report.unavailable is not None:
                row.append("unavailable")
                continue
            result = next(r for r in report.results if r.name == spec.name)
            mark = {"held": "held", "broken": "BROKEN", "error": "ERROR"}.get(result.status)
            row.append(f"{mark or 'not claimed'}: {result.detail}" if result.detail else "")
        rows.append(row)
    print_table(stdout_console(), columns, rows)


@sandbox_command.command("cleanup")
@click.argument("provider", required=False)
@debug_option
@handle_errors
def cleanup_command(provider: str | None, debug: bool) -> None:
    """Remove what killed runs left in PROVIDER (default: every provider): containers, cgroups."""
    import anyio

    from trialkit.sandbox.base import SandboxError
    from trialkit.sandbox.registry import load_provider, provider_names

    for name in [provider] if provider else provider_names():
        try:
            loaded = load_provider(name)
        except SandboxError as exc:
            if provider:
                fail(str(exc))
            continue
        if loaded.unavailable() is not None:
            if provider:
                fail(str(loaded.unavailable()))
            continue
        try:
            removed = anyio.run(loaded.cleanup)
        except SandboxError as exc:  # the engine failed (a docker daemon that stopped answering)
            fail(f"{name}: {exc}", EXIT_RUN_FAILED)
        click.echo(f"{name}: removed {removed}")
