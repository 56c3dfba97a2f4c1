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
    help="Exit 1 when a later run is significantly worse than RUN_A (for CI).",
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
    help="Confidence of the interval of the pass rate difference.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the paired bootstrap."
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
    score, cost and latency. For the suite: the pass rate difference of RUN_B against RUN_A with
    a paired bootstrap interval over tasks, and the exact McNemar test on the task verdicts.
    Tasks in only one run are listed apart and not compared; tasks that errored in either run
    are not tested. More runs make a matrix with a column per run, each against RUN_A.

    `--format github` writes a pull request comment (Markdown with a hidden marker line, under
    GitHub's 65,536 characters); `--annotations` adds workflow commands that mark the line
    defining each failing task.
    """
    from trialkit.analysis.compare import (
        CompareError,
        cannot_tell_why,
        compare_refs,
        is_report_file,
    )

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
    if fail_on_regression:
        for pair in comparison.pairs:
            if pair.difference_ci_unavailable is not None:
                why = pair.difference_ci_unavailable
                fail(f"--fail-on-regression needs the interval of the difference, and {why}")
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
                f"cannot tell whether run {pair.candidate} is worse than run A: "
                f"{cannot_tell_why(pair)}",
                err=True,
            )
    if comparison.worse:
        worse = ", ".join(pair.candidate for pair in comparison.worse)
        click.echo(f"regression: run {worse} is significantly worse than run A", err=True)
        sys.exit(EXIT_GATE_FAILED)
