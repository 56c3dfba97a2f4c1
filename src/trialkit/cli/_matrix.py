"""`trialkit run --models A,B,C`: one run per model at once, printed side by side."""

from __future__ import annotations

from typing import Any

import click

from trialkit.cli._common import fail


def parse_models(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    if len(models) < 2:
        fail(f"--models: give at least two models, comma-separated, got {text!r}")
    if len(set(models)) != len(models):
        fail(f"--models: a model is listed twice in {text!r}")
    return models


def run_matrix(
    suite: Any,
    models: list[str],
    *,
    settings: Any,
    store: Any,
    progress: Any,
    console: Any,
) -> int:
    """Run the suite for each model; print the matrix and one verdict line per run; the exit
    code: 3 if any run errored past the allowance, else 1 if any gate failed, else 0."""
    from rich.text import Text

    from trialkit._sync import run_blocking
    from trialkit.reports._table import print_line
    from trialkit.run.matrix import run_models

    reports = run_blocking(
        lambda: run_models(suite, models, settings=settings, store=store, progress=progress)
    )
    if console is not None:
        _print_matrix(reports, models, console)
    codes = []
    for model, report in zip(models, reports, strict=True):
        gate = report.gate()  # the thresholds the runs were started with
        s = report.summary
        rate = "n/a" if s.pass_rate is None else f"{s.pass_rate:.1%}"
        line = (
            f"{model}: {s.passed_tasks}/{s.tasks} tasks passed, pass rate {rate} over "
            f"{s.trials} trials, {s.errors} errors — run {report.run.id}"
        )
        if console is None:
            click.echo(line)
        else:  # wrapped between words on a terminal, so the run id stays whole
            print_line(console, Text(line))
        for reason in gate.reasons:
            click.echo(f"gate failed for {model}: {reason}", err=True)
        codes.append(gate.exit_code)
    return 3 if 3 in codes else 1 if 1 in codes else 0


def _print_matrix(reports: list[Any], models: list[str], console: Any) -> None:
    """The runs side by side, as `trialkit compare` prints them (it needs no extra: without
    numpy the interval is shown as unavailable)."""
    from trialkit.analysis.compare import compare_reports
    from trialkit.reports.compare import render_compare_terminal

    render_compare_terminal(compare_reports(reports, models=models), console)
