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
    store_option,
    write_output,
)
from trialkit.cli._junit import junit_options
from trialkit.cli._matrix import parse_models, run_matrix
from trialkit.cli._offline import confine_offline
from trialkit.run.rerun import RERUN_CHOICES, RerunOnly
from trialkit.run.settings import RunSettings, SettingsError


def parse_settings(**options: Any) -> RunSettings:
    """The run's settings from the options as typed; a bad value is one line, exit 2."""
    try:
        return RunSettings.parse(**options)
    except SettingsError as exc:
        fail(str(exc))


@click.command("run")
@click.argument("target")
@click.option(
    "--trials",
    metavar="N|auto",
    help="Trials per task (overrides the suite), or `auto`: sample each task only while its "
    "verdict or pass rate is undecided (see --max-trials, --precision); with --baseline, also "
    "only while more trials could change its comparison with the baseline.",
)
@click.option(
    "--max-trials",
    type=click.IntRange(min=1),
    help="With --trials auto: the most trials any task gets [default: each task's own "
    "trial count, so an adaptive run never takes more trials than a fixed one].",
)
@click.option(
    "--precision",
    type=click.FloatRange(0, 1, min_open=True),
    help="With --trials auto: a task stops once the 95% interval of its pass rate is at most "
    "this wide [default: 0.2].",
)
@click.option(
    "--models",
    metavar="A,B,...",
    help="Run the suite once per model (comma-separated), all at once so their trials "
    "interleave, and print the runs side by side.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Trials running at once.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Processes that run trials, sharing --concurrency: for latency-bound runs (many "
    "model calls at once) that one core cannot keep up with. Per-model limits (max "
    "concurrency, rpm, tpm) then hold in each process. With --executor ray: Ray actors. "
    "[default: 1; with --executor ray, one per CPU of the cluster]",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where trials run: here (local, with --workers processes), or in actors on a Ray "
    "cluster (ray: the one RAY_ADDRESS names, or a local one started for the run; needs "
    "pip install 'trialkit[ray]').",
)
@click.option(
    "--ray-env",
    "ray_env",
    multiple=True,
    metavar="NAME[,NAME...]",
    help="With --executor ray: pass this environment variable, with its value here, to the "
    "Ray actors (repeatable). Only the name is ever shown; the value is never logged or stored.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Per-trial timeout (overrides the suite's and tasks'; default 60).",
)
@click.option(
    "--task",
    "task_ids",
    multiple=True,
    metavar="ID",
    help="Run only this task (glob patterns allowed; repeatable).",
)
@click.option("--tag", "tags", multiple=True, help="Run only tasks with this tag (repeatable).")
@click.option("--name", help="A name for this run (`trialkit report NAME` finds its latest).")
@click.option(
    "--model",
    envvar="TRIALKIT_MODEL",
    help="The model under test when neither the task nor the suite names one "
    "(provider/name, e.g. openai/gpt-4o-mini) [env TRIALKIT_MODEL].",
)
@click.option("--judge-model", help="The model judges use when they name none.")
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False),
    envvar="TRIALKIT_CACHE",
    metavar="DIR",
    help="Cassette folder for recorded model calls [env TRIALKIT_CACHE].",
)
@click.option(
    "--cache-mode",
    type=click.Choice(["live", "record", "replay", "auto"]),
    envvar="TRIALKIT_CACHE_MODE",
    help="live: no cassette; record: call and store; replay: never call (a miss is an "
    "error); auto: replay what exists, record the rest [default: auto with --cache, else "
    "live; env TRIALKIT_CACHE_MODE].",
)
@click.option(
    "--no-capture",
    is_flag=True,
    help="Do not capture the model calls the agent makes with its own SDK clients (httpx, "
    "httpx2): only calls through trialkit's models, and those of command-line agents through "
    "the model proxy, are recorded and replayed.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Refuse every request of a trial to a host other than this machine (a trial error "
    "naming it), in a loopback-only network namespace where the machine allows one (else a "
    "line at start says what is not covered): proves a replayed run is hermetic.",
)
@click.option(
    "--max-cost",
    type=click.FloatRange(min=0, min_open=True),
    metavar="DOLLARS",
    help="Stop scheduling new trials once this much has been spent.",
)
@store_option
@click.option(
    "--resume",
    "resume_ref",
    metavar="RUN",
    help="Finish a stored run of this suite: run only its missing trials, then report it whole.",
)
@click.option(
    "--retry-errors", is_flag=True, help="With --resume: run again the trials that errored."
)
@click.option(
    "--rerun",
    "rerun_ref",
    metavar="RUN",
    help="A new run of only the tasks of stored run RUN that did not pass (see --only); its "
    "config names RUN.",
)
@click.option(
    "--only",
    type=click.Choice(RERUN_CHOICES),
    help="With --rerun: the tasks to run again, by their verdict in RUN: failed, errored, or "
    "not-passed (failed, errored or unknown) [default: not-passed].",
)
@click.option(
    "--baseline",
    "baseline_ref",
    metavar="FILE|RUN",
    help="Compare this run with a baseline: a JSON report file (e.g. the artifact of a run on "
    "the base branch; no shared store needed) or a stored run; print the comparison with its "
    "significance.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="With --baseline: fail the gate (exit 1) when this run is significantly worse.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the JSON report here.",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the Markdown report here (e.g. $GITHUB_STEP_SUMMARY), under GitHub's 1 MiB "
    "limit; with --baseline it begins with the comparison.",
)
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write a JUnit XML report here.",
)
@junit_options
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the HTML report here: one page that opens offline.",
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write the trials as CSV here: one row per trial, with each grader's score.",
)
@click.option(
    "--github-comment",
    "comment_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="With --baseline: write the comparison as a pull request comment here (Markdown "
    "with a hidden marker line, under GitHub's 65,536 characters).",
)
@click.option(
    "--report-url",
    "report_urls",
    multiple=True,
    metavar="URL",
    help="With --baseline and --github-comment or --markdown: a link to the HTML report of "
    "this run (once), or of the baseline and this run (twice, in that order).",
)
@click.option(
    "--annotations",
    is_flag=True,
    help="Print GitHub workflow annotations (::error file=…,line=…::) for the failing, "
    "errored and flaky tasks (with --baseline: and the new failures) on standard output.",
)
@click.option(
    "--trace-jsonl",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write each trial with its events to FILE as JSON Lines as the run goes.",
)
@click.option(
    "--include-content",
    is_flag=True,
    help="With --trace-jsonl: include prompts, answers, tool arguments and results.",
)
@click.option(
    "--min-pass-rate",
    metavar="X",
    help="Fail the gate (exit 1) when the pass rate is under X (0.8 or 80%).",
)
@click.option(
    "--fail-on-error",
    "fail_on_error",
    metavar="N|FRACTION",
    default="0",
    help="Errored trials allowed before exit 3: a count or a fraction [default: 0].",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
@click.option("--quiet", "-q", is_flag=True, help="Print only the final verdict line.")
@debug_option
@handle_errors
def run_command(
    target: str,
    trials: str | None,
    max_trials: int | None,
    precision: float | None,
    models: str | None,
    concurrency: int,
    workers: int | None,
    executor: str,
    ray_env: tuple[str, ...],
    timeout: float | None,
    task_ids: tuple[str, ...],
    tags: tuple[str, ...],
    name: str | None,
    model: str | None,
    judge_model: str | None,
    cache_dir: str | None,
    cache_mode: str | None,
    no_capture: bool,
    offline: bool,
    max_cost: float | None,
    store_url: str | None,
    resume_ref: str | None,
    retry_errors: bool,
    rerun_ref: str | None,
    only: str | None,
    baseline_ref: str | None,
    fail_on_regression: bool,
    json_path: str | None,
    markdown_path: str | None,
    junit_path: str | None,
    junit_capability: str,
    junit_locations: str,
    html_path: str | None,
    csv_path: str | None,
    comment_path: str | None,
    report_urls: tuple[str, ...],
    annotations: bool,
    trace_jsonl: str | None,
    include_content: bool,
    min_pass_rate: str | None,
    fail_on_error: str,
    no_progress: bool,
    quiet: bool,
    debug: bool,
) -> None:
    """Run the suite TARGET: a suite folder or file (.yaml, .json), another tool's file (a
    promptfoo config, openai/evals or inspect_ai samples; or prefixed evals:, inspect:,
    promptfoo:, hf:), or Python (path.py, path.py:name, package.module:name).

    Exit codes: 0 the gate passed; 1 the gate failed (a regression task failed, or the pass rate
    is under --min-pass-rate); 2 bad usage or a bad suite (nothing ran); 3 more trials errored
    than --fail-on-error allows; 4 the run could not finish (the store or the worker processes
    failed: what finished is stored, --resume continues); 130 interrupted (what finished is
    stored).
    """
    from trialkit.executors.ray_runtime import parse_names
    from trialkit.reports import render_terminal
    from trialkit.run.progress import Progress, progress_for
    from trialkit.run.runner import Runner

    settings = parse_settings(
        trials=trials,
        max_trials=max_trials,
        precision=precision,
        cache=cache_dir,
        cache_mode=cache_mode,
        min_pass_rate=min_pass_rate,
        fail_on_error=fail_on_error,
        concurrency=concurrency,
        timeout=timeout,
        task_ids=task_ids,
        tags=tags,
        name=name,
        model=model,
        judge_model=judge_model,
        capture=not no_capture,
        offline=offline,
        max_cost=max_cost,
        workers=workers,
        executor=executor,
        ray_env=parse_names(ray_env),
    )
    if offline:  # before the suite's module is imported: it may start threads
        confine_offline(store_url, executor=executor)
    suite = _load(target, model, click.get_current_context())
    console = stdout_console()
    err_console = _stderr_console()
    progress: Progress | None = None
    if not (no_progress or quiet):
        progress = progress_for(err_console)
    if models is not None:
        refused = [
            flag
            for flag, given in (
                ("--model", model),
                ("--resume", resume_ref),
                ("--rerun", rerun_ref),
                ("--baseline", baseline_ref),
                ("--json", json_path),
                ("--markdown", markdown_path),
                ("--junit", junit_path),
                ("--html", html_path),
                ("--csv", csv_path),
                ("--github-comment", comment_path),
                ("--annotations", annotations),
                ("--trace-jsonl", trace_jsonl),
            )
            if given
        ]
        if refused:
            fail(
                f"--models does not go with {', '.join(refused)}: each model gets its own run; "
                "`trialkit report RUN` writes any run's reports"
            )
        from trialkit.run.matrix import check_models_runs

        chosen = parse_models(models)
        check_models_runs(suite, chosen, settings=settings)
        store = open_store(store_url, create=True)
        try:
            code = run_matrix(
                suite,
                chosen,
                settings=settings,
                store=store,
                progress=progress,
                console=None if quiet else console,
            )
        finally:
            store.close()
        sys.exit(code)
    runner = Runner(
        settings,
        progress=progress,
        exporters=_exporters(trace_jsonl, include_content),
    )
    if retry_errors and resume_ref is None:
        fail("--retry-errors needs --resume RUN")
    if only is not None and rerun_ref is None:
        fail("--only goes with --rerun RUN")
    if rerun_ref is not None and resume_ref is not None:
        fail(
            "--rerun and --resume do not go together: --resume RUN --retry-errors finishes "
            "RUN in place, --rerun RUN makes a new run"
        )
    if fail_on_regression and baseline_ref is None:
        fail("--fail-on-regression needs --baseline FILE|RUN")
    if comment_path is not None and baseline_ref is None:
        fail("--github-comment needs --baseline FILE|RUN: the comment is the comparison")
    if report_urls and (baseline_ref is None or (comment_path or markdown_path) is None):
        fail(
            "--report-url goes with --baseline and --github-comment FILE or --markdown FILE: "
            "the comparison links to the reports"
        )
    if len(report_urls) > 2:
        fail(
            f"--report-url: {len(report_urls)} URLs; give one (this run's report) or two (the "
            "baseline's and this run's)"
        )
    if resume_ref is None:
        runner.check(suite)  # a run that cannot work is exit 2 before anything is stored
    runner.store = store = open_store(store_url, create=resume_ref is None)
    # Open until the command ends: the JSON and CSV reports are read from it after the run.
    click.get_current_context().call_on_close(store.close)
    resume = store.resolve_run(resume_ref) if resume_ref is not None else None
    rerun = store.resolve_run(rerun_ref) if rerun_ref is not None else None
    baseline = (
        load_baseline(baseline_ref, store, suite, fail_on_regression)
        if baseline_ref is not None
        else None
    )
    if baseline is not None and runner.adaptive is not None and resume is None:
        # --trials auto: a task also stops once more trials cannot change its comparison.
        counts = {t.id: (t.passed, t.passed + t.failed) for t in baseline.tasks}
        runner.adaptive = dataclasses.replace(runner.adaptive, baseline=counts)
    try:
        report = run_blocking(
            functools.partial(
                runner.run,
                suite,
                resume=resume,
                retry_errors=retry_errors,
                rerun=rerun,
                only=cast(RerunOnly, only or "not-passed"),
            )
        )
    except KeyboardInterrupt:
        run = runner.last_run
        stored = f"; {runner.finished} finished trials are stored in run {run.id}" if run else ""
        click.echo(f"interrupted{stored}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except RunFailed as exc:  # exit 4: the store or the workers failed mid-run
        where = ["--store", store.url] if store_url else []
        again = shlex.join(["trialkit", "run", target, *where, "--resume", exc.run_id])
        trials = "trial is" if exc.stored == 1 else "trials are"
        fail(
            f"{exc.reason}; {exc.stored} finished {trials} stored, `{again}` continues",
            code=EXIT_RUN_FAILED,
        )

    if not quiet:
        render_terminal(report, console)
    comparison = compare_with(baseline, report) if baseline is not None else None
    if json_path is not None:  # streamed from the store, a task at a time
        from trialkit.cli.report import write_json_file

        write_json_file(store, report.run.id, json_path)
    if markdown_path is not None:
        from trialkit.reports.github import render_job_summary

        _write(
            markdown_path,
            lambda: render_job_summary(report, comparison=comparison, report_urls=report_urls),
        )
    if comparison is not None and comment_path is not None:
        from trialkit.reports.github import render_pr_comment

        _write(comment_path, lambda: render_pr_comment(comparison, report_urls=report_urls))
    _write(
        junit_path,
        lambda: report.to_junit(
            capability_failures=cast(Any, junit_capability), locations=cast(Any, junit_locations)
        ),
    )
    _write(html_path, report.to_html)
    if csv_path is not None:
        from trialkit.cli.report import write_csv_file

        write_csv_file(store, report.run.id, csv_path)
    gate = report.gate()  # the thresholds this run was started with
    for problem in runner.export_errors:
        click.echo(f"export failed: {problem}", err=True)
    for notice in runner.notices:
        click.echo(notice, err=True)
    if annotations:
        from trialkit.reports.github import annotations as annotate

        for line in annotate(comparison if comparison is not None else report):
            click.echo(line)
    worse = comparison is not None and print_comparison(comparison, console, quiet=quiet)
    _print_verdict(report, gate, console, err_console)
    code = gate.exit_code
    if worse:
        assert baseline is not None
        from rich.text import Text

        from trialkit.reports._table import print_line

        print_line(
            err_console,
            Text(f"regression: significantly worse than the baseline {baseline.run.id}"),
        )
        if fail_on_regression and code == 0:
            code = EXIT_GATE_FAILED
    sys.exit(code)


def _load(target: str, model: str | None, ctx: click.Context) -> Any:
    """The suite, or every problem of a bad suite file on its own line (exit 2)."""
    from trialkit.cli.validate import fail_with_problems
    from trialkit.loaders.errors import SuiteFileError
    from trialkit.loaders.target import load_target

    typed = ctx.get_parameter_source("model") is click.core.ParameterSource.COMMANDLINE
    try:
        return load_target(target, model=model if typed else None)
    except SuiteFileError as exc:
        fail_with_problems(exc.problems, target)


def _exporters(trace_jsonl: str | None, include_content: bool) -> list[Any]:
    if include_content and trace_jsonl is None:
        fail("--include-content goes with --trace-jsonl FILE")
    if trace_jsonl is None:
        return []
    from trialkit.exporters import JsonlExporter

    return [JsonlExporter(trace_jsonl, include_content=include_content)]


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
