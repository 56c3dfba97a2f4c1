"""`trialkit transcripts list|show|diff`: look at stored trials, one or two at a time."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import TYPE_CHECKING

import click

from trialkit.cli._common import (
    debug_option,
    fail,
    handle_errors,
    open_store,
    stdout_console,
    store_option,
)
from trialkit.score import Verdict

if TYPE_CHECKING:
    from trialkit.store import Store
    from trialkit.trial import Trial

_NAMES_SHOWN = 20
_REF = re.compile(r"(?P<run>.+)/(?P<task>[^/#]+)(?:#(?P<index>[0-9]+))?", re.ASCII)


@click.group("transcripts")
def transcripts_command() -> None:
    """List trials, show one trial's transcript, or compare a task's trial in two runs."""


@transcripts_command.command(
    "list", short_help="List a run's trials: verdict, cost and why each did not pass."
)
@click.option(
    "--run",
    "run_ref",
    metavar="RUN",
    help="The run: an id, a unique id prefix or a run name [default: the latest run].",
)
@click.option(
    "--task",
    "task_pattern",
    metavar="TASK",
    help="Only this task, or the tasks matching a glob such as 'geo-*'.",
)
@click.option(
    "--status",
    type=click.Choice([v.value for v in Verdict]),
    help="Only trials with this verdict.",
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Show at most N trials.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of trials.")
@store_option
@debug_option
@handle_errors
def list_command(
    run_ref: str | None,
    task_pattern: str | None,
    status: str | None,
    limit: int | None,
    as_json: bool,
    store_url: str | None,
    debug: bool,
) -> None:
    """List the trials of a run in the suite's task order, then by trial number: verdict,
    status, duration, tokens, cost, and the error or first check that did not pass.

    Refer to one in `trialkit transcripts show RUN/TASK#N`.
    """
    from trialkit.reports.transcript import render_trial_list
    from trialkit.store import queries

    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref) if run_ref else queries.latest_run_id(store)
        if run_id is None:
            click.echo("[]" if as_json else "no runs yet: `trialkit run TARGET` makes one")
            return
        tasks = None if task_pattern is None else _matching_tasks(store, run_id, task_pattern)
        verdict = None if status is None else Verdict(status)
        listing = queries.list_trials(store, run_id, tasks=tasks, verdict=verdict, limit=limit)
        name = queries.run_name(store, run_id)
    if as_json:
        click.echo(json.dumps([line.model_dump(mode="json") for line in listing.lines], indent=2))
        return
    render_trial_list(listing, stdout_console(), run_id=run_id, run_name=name)


@transcripts_command.command(
    "show", short_help="Show one trial: its turns, tool calls, outcome, scores and error."
)
@click.argument("ref", metavar="RUN/TASK#N")
@click.option(
    "--full",
    is_flag=True,
    help="Show reasoning, long tool arguments and results, workspace diffs and the "
    "traceback in full.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole trial record as JSON.")
@store_option
@debug_option
@handle_errors
def show_command(ref: str, full: bool, as_json: bool, store_url: str | None, debug: bool) -> None:
    """Show trial N of task TASK in run RUN (an id, a unique id prefix or a run name; `#N`
    defaults to #0): each turn with its messages, tool calls and their results, reasoning and
    model calls, then the outcome, the scores and the error."""
    from trialkit.reports.transcript import render_trial
    from trialkit.store import queries

    run_ref, task_id, index = _parse_ref(ref)
    with open_store(store_url) as store:
        run_id = store.resolve_run(run_ref)
        trial = _load_trial(store, run_id, task_id, index)
        name = None if as_json else queries.run_name(store, run_id)
    if as_json:
        click.echo(json.dumps(trial.model_dump(mode="json"), indent=2))
        return
    render_trial(trial, stdout_console(), full=full, run_name=name)


@transcripts_command.command("diff", short_help="Compare a task's trial in two runs, turn by turn.")
@click.option("--task", "task_id", required=True, metavar="TASK", help="The task to compare.")
@click.option(
    "--runs",
    "run_refs",
    required=True,
    metavar="A,B",
    help="The two runs, separated by a comma (ids, unique id prefixes or run names).",
)
@click.option(
    "--trial",
    "index",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="The trial number to compare in both runs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@store_option
@debug_option
@handle_errors
def diff_command(
    task_id: str, run_refs: str, index: int, as_json: bool, store_url: str | None, debug: bool
) -> None:
    """Compare trial N of TASK in two runs, turn by turn: messages (changed words marked
    [-removed-]{+added+}), tool calls by position, the outcome, and the scores by name.

    Marks: `~` changed, `-` only in A, `+` only in B; unchanged lines are dimmed.
    """
    from trialkit.reports.transcript_diff import diff_trials, render_diff
    from trialkit.store import queries

    refs = [part.strip() for part in run_refs.split(",")]
    if len(refs) != 2 or not all(refs):
        fail(
            f"--runs takes two runs separated by a comma (e.g. --runs nightly,abc123), "
            f"not {run_refs!r}"
        )
    with open_store(store_url) as store:
        run_ids = [store.resolve_run(ref) for ref in refs]
        a, b = (_load_trial(store, run_id, task_id, index) for run_id in run_ids)
        names = queries.run_name(store, run_ids[0]), queries.run_name(store, run_ids[1])
    diff = diff_trials(a, b, run_names=names)
    if as_json:
        click.echo(json.dumps(diff.model_dump(mode="json"), indent=2))
        return
    render_diff(diff, stdout_console())


def _parse_ref(ref: str) -> tuple[str, str, int]:
    match = _REF.fullmatch(ref)
    if match is None:
        fail(f"{ref!r} is not a trial: write RUN/TASK#N, e.g. nightly/france#0")
    return match["run"], match["task"], int(match["index"] or 0)


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return f"{shown}, … ({more} more)" if more > 0 else shown


def _no_task(run_id: str, what: str, tasks: list[str]) -> str:
    known = f"its tasks: {_listed(tasks)}" if tasks else "it has no tasks"
    return f"run {run_id} has no task {what}; {known}"


def _matching_tasks(store: Store, run_id: str, pattern: str) -> list[str]:
    from trialkit.store import queries

    tasks = queries.task_ids(store, run_id)
    if any(ch in pattern for ch in "*?["):
        matched = [task for task in tasks if fnmatch.fnmatchcase(task, pattern)]
        what = f"matching {pattern!r}"
    else:
        matched = [task for task in tasks if task == pattern]
        what = repr(pattern)
    if not matched:
        fail(_no_task(run_id, what, tasks))
    return matched


def _load_trial(store: Store, run_id: str, task_id: str, index: int) -> Trial:
    """The trial, or a one-line error that says what the run has instead."""
    from trialkit.store import TrialNotFound, queries

    try:
        return store.load_trial(run_id, task_id, index)
    except TrialNotFound:
        pass
    tasks = queries.task_ids(store, run_id)
    indices = queries.trial_indices(store, run_id, task_id)
    if not indices and task_id not in tasks:
        fail(_no_task(run_id, repr(task_id), tasks))
    if not indices:
        fail(f"run {run_id} has no stored trial of task {task_id!r} yet")
    numbers = ", ".join(f"#{i}" for i in indices[:_NAMES_SHOWN])
    fail(f"run {run_id} has no trial {task_id}#{index}; task {task_id!r} has trials {numbers}")
