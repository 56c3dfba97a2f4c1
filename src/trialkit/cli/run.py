"""`trialkit run TARGET`: run a suite, store every trial, report, and gate CI."""

from __future__ import annotations

import dataclasses
import functools
import shlex
import sys
from collections.abc import Callable
from typing import Any, cast

import click

from trialkit._errors import RunFailed
from trialkit._sync import run_blocking
from trialkit.cli._baseline import compare_with, load_baseline, print_comparison
from trialkit.cli._common import (
    EXIT_GATE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_RUN_FAILED,
    debug_option,
    fail,
    handle_errors,
    open_store,
    stdout_console,
    write_output,
)
from trialkit.cli._junit import junit_options
from trialkit.cli._matrix import parse_models, run_matrix
from trialkit.cli._offline import confine_offline
from trialkit.cli._options import Chosen, options_of, read_options, store_value
from trialkit.run.rerun import RerunOnly
from trialkit.run.settings import RunSettings, SettingsError


@click.command("run")
@click.argument("target")
@options_of("run")
@junit_options
@debug_option
@handle_errors
def run_command(target: str, **params: Any) -> None:
    """Run the suite TARGET: a suite folder or file (.yaml, .json), another tool's file (a
    promptfoo config, openai/evals or inspect_ai samples; or prefixed evals:, inspect:,
    promptfoo:, hf:), or Python (path.py, path.py:name, package.module:name).

    Each setting comes from its flag, else its environment variable, else [tool.trialkit] in
    the nearest pyproject.toml (docs/configuration.md).

    Exit codes: 0 the gate passed; 1 the gate failed (a regression task failed, or the pass rate
    is under --min-pass-rate); 2 bad usage or a bad suite (nothing ran); 3 more trials errored
    than --fail-on-error allows; 4 the run could not finish (the store or the worker processes
    failed: what finished is stored, --resume continues); 130 interrupted (what finished is
    stored).
    """
    from trialkit.run.progress import progress_for
    from trialkit.run.runner import Runner

    o = read_options("run", params)
    settings = parse_settings(o)
    store_url = store_value(o)
    if o.offline:  # before the suite's module is imported: it may start threads
        confine_offline(store_url, executor=o.executor)
    suite = _load(target, o.model if o.typed("model") else None)
    if o.sandbox:
        in_sandbox(suite, o.sandbox)
    console, err_console = stdout_console(), _stderr_console()
    progress = None if o.no_progress or o.quiet else progress_for(err_console)
    if o.models is not None:
        sys.exit(_run_models(suite, o, settings, store_url, progress, console))
    _check_flags(o)
    runner = Runner(settings, progress=progress, exporters=_exporters(o))
    if o.resume is None:
        runner.check(suite)  # a run that cannot work is exit 2 before anything is stored
    runner.store = store = open_store(store_url, create=o.resume is None)
    # Open until the command ends: the JSON and CSV reports are read from it after the run.
    click.get_current_context().call_on_close(store.close)
    resume = store.resolve_run(o.resume) if o.resume is not None else None
    rerun = store.resolve_run(o.rerun) if o.rerun is not None else None
    baseline = (
        load_baseline(o.baseline, store, suite, o.fail_on_regression)
        if o.baseline is not None
        else None
    )
    if baseline is not None and runner.adaptive is not None and resume is None:
        # --trials auto: a task also stops once more trials cannot change its comparison.
        counts = {t.id: (t.passed, t.passed + t.failed) for t in baseline.tasks}
        runner.adaptive = dataclasses.replace(runner.adaptive, baseline=counts)
    run = functools.partial(
        runner.run,
        suite,
        resume=resume,
        retry_errors=o.retry_errors,
        rerun=rerun,
        only=cast(RerunOnly, o.only or "not-passed"),
    )
    report = _run(runner, run, target, store, o)
    if not o.quiet:
        from trialkit.reports import render_terminal

        render_terminal(report, console)
    comparison = compare_with(baseline, report) if baseline is not None else None
    _write_reports(report, comparison, store, o, params)
    sys.exit(_finish(report, runner, comparison, baseline, o, console, err_console))


def in_sandbox(suite: Any, provider: str) -> None:
    """`--sandbox PROVIDER`: the suite's command-line agent runs in it, or else the suite's
    trials do (`ctx.sandbox` of a Python agent and the graders); exit 2 when it cannot."""
    from trialkit.run.sandboxes import sandbox_named
    from trialkit.sandbox.base import SandboxError

    try:
        sandbox_named(suite, provider)
    except (SandboxError, ValueError) as exc:
        fail(f"--sandbox: {exc}")


def parse_settings(o: Chosen) -> RunSettings:
    """The run's settings from the options' values; a bad value is one line naming where it
    came from (the flag, the variable, the line of pyproject.toml), exit 2."""
    try:
        return RunSettings.parse(option_names=o.where(), **o.for_settings())
    except SettingsError as exc:
        fail(str(exc))


def _run_models(
    suite: Any, o: Chosen, settings: RunSettings, store_url: str | None, progress: Any, console: Any
) -> int:
    """`--models A,B`: one run per model, side by side."""
    refused = [
        option.cli_flag
        for option in o.options
        if option.name in _NOT_WITH_MODELS and getattr(o, option.name)
    ]
    if o.typed("model"):
        refused.insert(0, "--model")
    if refused:
        fail(
            f"--models does not go with {', '.join(refused)}: each model gets its own run; "
            "`trialkit report RUN` writes any run's reports"
        )
    from trialkit.run.matrix import check_models_runs

    chosen = parse_models(o.models)
    check_models_runs(suite, chosen, settings=settings)
    store = open_store(store_url, create=True)
    try:
        return run_matrix(
            suite,
            chosen,
            settings=settings,
            store=store,
            progress=progress,
            console=None if o.quiet else console,
        )
    finally:
        store.close()


_NOT_WITH_MODELS = (
    "resume", "rerun", "baseline", "json", "markdown", "junit", "html", "csv",
    "github_comment", "annotations", "trace_jsonl",
)  # fmt: skip


def _check_flags(o: Chosen) -> None:
    """Flags that need another, or refuse one: one line each, exit 2."""
    if o.retry_errors and o.resume is None:
        fail("--retry-errors needs --resume RUN")
    if o.only is not None and o.rerun is None:
        fail("--only goes with --rerun RUN")
    if o.rerun is not None and o.resume is not None:
        fail(
            "--rerun and --resume do not go together: --resume RUN --retry-errors finishes "
            "RUN in place, --rerun RUN makes a new run"
        )
    if o.fail_on_regression and o.baseline is None:
        fail("--fail-on-regression needs --baseline FILE|RUN")
    if o.github_comment is not None and o.baseline is None:
        fail("--github-comment needs --baseline FILE|RUN: the comment is the comparison")
    if o.report_url and (o.baseline is None or (o.github_comment or o.markdown) is None):
        fail(
            "--report-url goes with --baseline and --github-comment FILE or --markdown FILE: "
            "the comparison links to the reports"
        )
    if len(o.report_url) > 2:
        fail(
            f"--report-url: {len(o.report_url)} URLs; give one (this run's report) or two (the "
            "baseline's and this run's)"
        )


def _run(runner: Any, run: Callable[[], Any], target: str, store: Any, o: Chosen) -> Any:
    """The run's report; Ctrl-C is exit 130, a failure of the store or workers exit 4 with
    the command that continues the run."""
    try:
        return run_blocking(run)
    except KeyboardInterrupt:
        last = runner.last_run
        stored = f"; {runner.finished} finished trials are stored in run {last.id}" if last else ""
        click.echo(f"interrupted{stored}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except RunFailed as exc:  # exit 4: the store or the workers failed mid-run
        where = ["--store", store.url] if o.typed("store") else []
        again = shlex.join(["trialkit", "run", target, *where, "--resume", exc.run_id])
        trials = "trial is" if exc.stored == 1 else "trials are"
        fail(
            f"{exc.reason}; {exc.stored} finished {trials} stored, `{again}` continues",
            code=EXIT_RUN_FAILED,
        )


def _write_reports(
    report: Any, comparison: Any, store: Any, o: Chosen, params: dict[str, Any]
) -> None:
    """The report files asked for."""
    if o.json is not None:  # streamed from the store, a task at a time
        from trialkit.cli.report import write_json_file

        write_json_file(store, report.run.id, o.json)
    urls = o.report_url
    if o.markdown is not None:
        from trialkit.reports.github import render_job_summary

        _write(
            o.markdown,
            lambda: render_job_summary(report, comparison=comparison, report_urls=urls),
        )
    if comparison is not None and o.github_comment is not None:
        from trialkit.reports.github import render_pr_comment

        _write(o.github_comment, lambda: render_pr_comment(comparison, report_urls=urls))
    _write(
        o.junit,
        lambda: report.to_junit(
            capability_failures=cast(Any, params["junit_capability"]),
            locations=cast(Any, params["junit_locations"]),
        ),
    )
    _write(o.html, report.to_html)
    if o.csv is not None:
        from trialkit.cli.report import write_csv_file

        write_csv_file(store, report.run.id, o.csv)


def _finish(
    report: Any,
    runner: Any,
    comparison: Any,
    baseline: Any,
    o: Chosen,
    console: Any,
    err_console: Any,
) -> int:
    """Print what the run left to say and the verdict; the exit code."""
    gate = report.gate()  # the thresholds this run was started with
    for problem in runner.export_errors:
        click.echo(f"export failed: {problem}", err=True)
    for notice in runner.notices:
        click.echo(notice, err=True)
    if o.annotations:
        from trialkit.reports.github import annotations as annotate

        for line in annotate(comparison if comparison is not None else report):
            click.echo(line)
    worse = comparison is not None and print_comparison(comparison, console, quiet=o.quiet)
    _print_verdict(report, gate, console, err_console)
    code: int = gate.exit_code
    if worse:
        from rich.text import Text

        from trialkit.reports._table import print_line

        print_line(
            err_console,
            Text(f"regression: significantly worse than the baseline {baseline.run.id}"),
        )
        if o.fail_on_regression and code == 0:
            code = EXIT_GATE_FAILED
    return code


def _load(target: str, model: str | None) -> Any:
    """The suite, or every problem of a bad suite file on its own line (exit 2). `model`
    (typed on the command line) replaces the model of another tool's file."""
    from trialkit.cli.validate import fail_with_problems
    from trialkit.loaders.errors import SuiteFileError
    from trialkit.loaders.target import load_target

    try:
        return load_target(target, model=model)
    except SuiteFileError as exc:
        fail_with_problems(exc.problems, target)


def _exporters(o: Chosen) -> list[Any]:
    if o.include_content and o.trace_jsonl is None:
        fail("--include-content goes with --trace-jsonl FILE")
    if o.trace_jsonl is None:
        return []
    from trialkit.exporters import JsonlExporter

    return [JsonlExporter(o.trace_jsonl, include_content=o.include_content)]


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _write(path: str | None, render: Callable[[], str]) -> None:
    """Write what `render` makes to `path`, rendered only when a path was asked for (a
    report of 10,000 tasks takes seconds to render as JSON)."""
    if path is not None:
        write_output(path, render(), "the report")


def _print_verdict(report: Any, gate: Any, console: Any, err_console: Any) -> None:
    """The verdict line, and why the gate failed: wrapped between words on a terminal (so the
    run id is never split), one line each in a log."""
    from rich.text import Text

    from trialkit.reports._table import print_line

    s = report.summary
    rate = "n/a" if s.pass_rate is None else f"{s.pass_rate:.1%}"
    line = (
        f"{s.passed_tasks}/{s.tasks} tasks passed, pass rate {rate} over {s.trials} trials, "
        f"{s.errors} {'error' if s.errors == 1 else 'errors'} — run {report.run.id}"
    )
    print_line(console, Text(line))
    if not gate.passed:
        for reason in gate.reasons:
            print_line(err_console, Text(f"gate failed: {reason}"), indent=0)
