"""`trialkit report RUN`: render any stored run again."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from trialkit.cli._common import (
    debug_option,
    fail,
    format_options,
    handle_errors,
    open_store,
    show,
    store_option,
)
from trialkit.cli._junit import junit_options


@click.command("report")
@click.argument("run_ref", metavar="RUN")
@format_options("table", "md", "json", "junit", "html", "csv")
@junit_options
@store_option
@debug_option
@handle_errors
def report_command(
    run_ref: str,
    fmt: str,
    output: str | None,
    junit_capability: Any,
    junit_locations: Any,
    store_url: str | None,
    debug: bool,
) -> None:
    """Render the stored run RUN (an id, a unique id prefix, or a run name: its latest run)."""
    with open_store(store_url) as store:
        try:
            run_id = store.resolve_run(run_ref)
        except LookupError as exc:
            fail(str(exc).strip("'\""))
        if fmt == "csv":  # one row per trial, streamed from the store
            write_csv_file(store, run_id, output)
            return
        if fmt == "json":  # task by task, streamed from the store
            write_json_file(store, run_id, output)
            return
        report = store.load_report(run_id)
    if fmt == "table":
        from trialkit.reports import render_terminal

        show(output, draw=lambda console: render_terminal(report, console))
    else:
        text = {
            "md": report.to_markdown,
            "junit": lambda: report.to_junit(
                capability_failures=junit_capability, locations=junit_locations
            ),
            "html": report.to_html,
        }[fmt]
        show(output, text=text())


def write_csv_file(store: Any, run_id: str, output: str | None) -> None:
    """The run as CSV, one row per trial, to `output` (a file; standard output when None)."""
    from trialkit.reports.csv import write_csv

    if output is None:
        write_csv(store, run_id, sys.stdout)
        return
    target = Path(output)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8", newline="") as out:
            write_csv(store, run_id, out)
    except OSError as exc:
        fail(f"{output}: cannot write the CSV: {exc.strerror or exc}")


def write_json_file(store: Any, run_id: str, output: str | None) -> None:
    """The run's JSON report, written as it is read from the store, to `output` (a file,
    replaced only once the report is whole; standard output when None)."""
    from trialkit.reports.json import write_json_report

    if output is None:
        with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
            write_json_report(store, run_id, spool)
            spool.seek(0)
            shutil.copyfileobj(spool, sys.stdout)
        sys.stdout.flush()
        return
    target = Path(output)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with partial.open("w", encoding="utf-8") as out:
                write_json_report(store, run_id, out)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    except OSError as exc:
        fail(f"{output}: cannot write the report: {exc.strerror or exc}")
