"""`trialkit compare RUN_A RUN_B [RUN…]`: runs of a suite side by side (stored runs or JSON
report files)."""

from __future__ import annotations

import contextlib
import sys

import click

from trialkit.cli._common import (
    EXIT_GATE_FAILED,
    debug_option,
    fail,
    format_options,
    handle_errors,
    open_store,
    show,
    store_option,
)


@click.command("compare")
@click.argument("run_refs", metavar="RUN_A RUN_B [RUN]...", nargs=-1, required=True)
@format_options("table", "md", "json", "github")
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when a later run is significantly worse than RUN_A on these tasks: the exact "
    "stratified test over tasks, trials as units (for CI).",
)
@click.option(
    "--allow-different-suites",
    is_flag=True,
    help="Compare runs of different suites, pairing their tasks by id.",
)
@click.option(
    "--confidence",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=0.95,
    show_default=True,
    help="Confidence of the tests and intervals (the gate's α is 1 − this).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the sign-flip test's random flips (used only past about a million sums).",
)
@click.option(
    "--report-url",
    "report_urls",
    multiple=True,
    metavar="URL",
    help="With --format github: a link to the HTML report, of the latest run (once) or of "
    "each run (once per run, in order).",
)
@click.option(
    "--annotations",
    is_flag=True,
    help="Print GitHub workflow annotations (::error file=…,line=…::) for the latest run's "
    "new failures, failing, errored and flaky tasks on standard output.",
)
@store_option
@debug_option
@handle_errors
def compare_command(
    run_refs: tuple[str, ...],
    fmt: str,
    output: str | None,
    fail_on_regression: bool,
    allow_different_suites: bool,
    confidence: float,
    seed: int,
    report_urls: tuple[str, ...],
    annotations: bool,
    store_url: str | None,
    debug: bool,
) -> None:
    """Compare runs of a suite, stored or saved as JSON report files.

    Each run is a stored run (an id, a unique id prefix or a run name) or a JSON report file (a
    path ending in .json, such as the report of the base branch's run), so the runs need not
    share a store.

    Per task: both runs' passed trials and pass rates, new failures, fixes, and the deltas of
    score, cost and latency. Then two answers for each later run against RUN_A
    (docs/statistics.md):

    Did the agent change on these tasks? (the gate) The exact stratified test over tasks with
    trials as units (exact Cochran-Mantel-Haenszel), and the tasks that changed on their own
    (Fisher's exact test, Holm-adjusted).

    Is it better or worse at tasks like these? The mean over tasks of the pass rate
    difference, its t interval and the exact sign-flip test over tasks; with 5 or fewer tasks
    that changed, too few to tell at 95%. McNemar's test on task verdicts is a further figure.

    Each states the smallest change it could detect at 80% power. Tasks with no decided trial
    in a run, or in only one run, are listed with the reason and not compared. More runs make a
    matrix with a column per run, each against RUN_A.

    `--format github` writes a pull request comment (Markdown with a hidden marker line, under
    GitHub's 65,536 characters); `--annotations` adds workflow commands that mark the line
    defining each failing task.
    """
    from trialkit.analysis.compare import CompareError, compare_refs, is_report_file

    if len(run_refs) < 2:
        fail("compare needs at least two runs: trialkit compare RUN_A RUN_B")
    if report_urls and fmt != "github":
        fail("--report-url is for --format github")
    files_only = all(is_report_file(ref) for ref in run_refs)
    opened = contextlib.nullcontext(None) if files_only else open_store(store_url)
    with opened as store:
        try:
            comparison = compare_refs(
                run_refs,
                store,
                confidence=confidence,
                seed=seed,
                allow_different_suites=allow_different_suites,
            )
        except (LookupError, CompareError) as exc:
            fail(str(exc))
    if report_urls and len(report_urls) not in (1, len(comparison.runs)):
        fail(
            f"--report-url: {len(report_urls)} URLs for {len(comparison.runs)} runs; give one "
            "(the latest run's) or one per run"
        )
    if annotations:
        from trialkit.reports.github import annotations as annotate

        for line in annotate(comparison):
            click.echo(line)
    if fmt == "table":
        from trialkit.reports.compare import render_compare_terminal

        show(output, draw=lambda console: render_compare_terminal(comparison, console), width=120)
    elif fmt == "github":
        from trialkit.reports.github import render_pr_comment

        show(output, text=render_pr_comment(comparison, report_urls=report_urls))
    else:
        show(output, text=comparison.to_markdown() if fmt == "md" else comparison.to_json())
    if not fail_on_regression:
        return
    for pair in comparison.pairs:
        if pair.outcome == "cannot_tell":
            click.echo(
                f"cannot tell whether run {pair.candidate} is worse than run A: no task has "
                "decided trials in both runs",
                err=True,
            )
    if comparison.worse:
        worse = ", ".join(pair.candidate for pair in comparison.worse)
        click.echo(
            f"regression: run {worse} is significantly worse than run A on these tasks "
            "(exact stratified test)",
            err=True,
        )
        sys.exit(EXIT_GATE_FAILED)
