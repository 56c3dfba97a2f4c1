"""`trialkit export RUN --to jsonl|otel|langfuse`: a stored run to a file or a tracing back end."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from trialkit.cli._common import (
    EXIT_USAGE,
    debug_option,
    fail,
    handle_errors,
    open_store,
    store_option,
)

EXIT_EXPORT_FAILED = 1


@click.command("export")
@click.argument("run_ref", metavar="RUN")
@click.option(
    "--to",
    "target",
    type=click.Choice(["jsonl", "otel", "langfuse"]),
    required=True,
    help="jsonl: JSON Lines, a line per trial; otel: OTLP/HTTP with the GenAI conventions; "
    "langfuse: Langfuse's OTLP endpoint plus its scores API.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    metavar="FILE",
    help="jsonl: write to FILE instead of standard output.",
)
@click.option(
    "--endpoint",
    metavar="URL",
    help="otel: the OTLP/HTTP endpoint; /v1/traces is added unless it ends so "
    "[env OTEL_EXPORTER_OTLP_ENDPOINT]; "
    "langfuse: the Langfuse URL [env LANGFUSE_HOST or LANGFUSE_BASE_URL].",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="otel: a header sent with every request (repeatable); for keys prefer "
    "OTEL_EXPORTER_OTLP_HEADERS, which stays out of the process list.",
)
@click.option(
    "--include-content",
    is_flag=True,
    help="Export message content (prompts, answers, tool arguments and results); "
    "left out by default.",
)
@store_option
@debug_option
@handle_errors
def export_command(
    run_ref: str,
    target: str,
    output: str | None,
    endpoint: str | None,
    headers: tuple[str, ...],
    include_content: bool,
    store_url: str | None,
    debug: bool,
) -> None:
    """Export the stored run RUN (an id, a unique id prefix, or a run name: its latest run).

    Langfuse keys come from LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY. Exit codes: 0 exported;
    1 the back end refused the export (what it accepted stays there); 2 bad usage or no such run.
    """
    if target != "jsonl" and output is not None:
        fail(f"-o/--output is for --to jsonl; --to {target} sends to --endpoint")
    if target != "otel" and headers:
        fail("--header is for --to otel")
    exporter = _exporter(target, output, endpoint, _parse_headers(headers), include_content)
    with open_store(store_url) as store:
        try:
            run_id = store.resolve_run(run_ref)
        except LookupError as exc:
            fail(str(exc).strip("'\""))
        report = store.load_report(run_id)
        try:
            exporter.on_run_start(report.run, report.suite)
            try:
                for trial in store.iter_trials(run_id):
                    exporter.on_trial(trial)
            finally:
                exporter.on_run_end(report.run)
        except OSError as exc:
            fail(f"{output}: cannot write the export: {exc.strerror or exc}", EXIT_USAGE)
    errors: list[str] = list(getattr(exporter, "errors", []))
    for error in errors:
        click.echo(f"error: {error}", err=True)
    click.echo(_summary(target, exporter, run_id), err=True)
    if errors:
        sys.exit(EXIT_EXPORT_FAILED)


def _exporter(
    target: str,
    output: str | None,
    endpoint: str | None,
    headers: dict[str, str],
    include_content: bool,
) -> Any:
    if target == "jsonl":
        from trialkit.exporters import JsonlExporter

        if output is None or output == "-":
            return JsonlExporter(sys.stdout.buffer, include_content=include_content)
        return JsonlExporter(output, include_content=include_content)
    try:
        if target == "otel":
            from trialkit.exporters import OtelExporter

            endpoint = endpoint or _env("OTEL_EXPORTER_OTLP_ENDPOINT")
            if not endpoint:
                fail(
                    "--to otel needs --endpoint URL (e.g. http://localhost:4318) "
                    "or OTEL_EXPORTER_OTLP_ENDPOINT"
                )
            return OtelExporter(endpoint, headers=headers, include_content=include_content)
        from trialkit.exporters import LangfuseExporter

        return LangfuseExporter(endpoint, include_content=include_content)
    except (ImportError, ValueError) as exc:
        fail(str(exc))


def _parse_headers(pairs: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            fail("--header: expected NAME=VALUE (the value is not shown here)")
        headers[name.strip()] = value.strip()
    return headers


def _summary(target: str, exporter: Any, run_id: str) -> str:
    trials = exporter.trials
    noun = "trial" if trials == 1 else "trials"
    if target == "jsonl":
        where = "standard output" if not isinstance(exporter.path, str) else exporter.path
        return f"exported {trials} {noun} of run {run_id} to {where}"
    sent = f"{trials} {noun} ({exporter.spans} spans"
    if target == "langfuse":
        sent += f", {exporter.scores} scores"
    return f"exported {sent}) of run {run_id} to {exporter.url}"


def _env(name: str) -> str | None:
    return os.environ.get(name) or None
