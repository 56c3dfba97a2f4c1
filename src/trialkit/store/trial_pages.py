"""A page of a run's trials, as `queries.list_trials` lists them, without listing them all.

`queries.list_trials` with a `limit` still orders (and counts) every trial of the run. Here the
tasks' trial counts come first, grouped by the database from a covering index; they say which
tasks the page falls in, and only those tasks' trials are listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from sqlalchemy import func, select

from trialkit.report import MAX_RESULTS_PER_TASK
from trialkit.score import Verdict
from trialkit.store.queries import TrialListing, _read, list_trials
from trialkit.store.schema import run_tasks, trials
from trialkit.store.store import Store


def trials_page(
    store: Store,
    run_id: str,
    *,
    tasks: Sequence[str] | None = None,
    verdict: Verdict | str | None = None,
    offset: int = 0,
    limit: int = 50,
) -> TrialListing:
    """Trials `offset` to `offset + limit` of a run in the suite's task order, then by trial
    number (then the trials of tasks the run did not plan, by task id); `tasks` keeps only
    those task ids, `verdict` only trials with that verdict. `total` counts every trial that
    matches."""
    chosen = None if verdict is None else Verdict(verdict)
    counts = select(trials.c.task_id, func.count().label("n")).where(trials.c.run_id == run_id)
    if chosen is not None:
        counts = counts.where(trials.c.verdict == chosen.value)
    if tasks is not None:
        counts = counts.where(trials.c.task_id.in_(list(tasks)))
    order = (
        select(run_tasks.c.task_id)
        .where(run_tasks.c.run_id == run_id)
        .order_by(run_tasks.c.position)
    )
    with _read(store, f"list the trials of run {run_id!r}") as conn:
        store._run_row(conn, run_id)
        sizes = {row.task_id: int(row.n) for row in conn.execute(counts.group_by(trials.c.task_id))}
        planned = list(conn.scalars(order))
    known = set(planned)
    tasks = [t for t in planned if t in sizes] + sorted(t for t in sizes if t not in known)
    total = sum(sizes.values())
    start, end = max(offset, 0), max(offset, 0) + max(limit, 0)
    wanted: list[tuple[str, int, int]] = []  # task, first and last+1 of its trials on the page
    seen = 0
    for task_id in tasks:
        n = sizes[task_id]
        low, high = max(start - seen, 0), min(end - seen, n)
        if low < high:
            wanted.append((task_id, low, high))
        seen += n
        if seen >= end:
            break
    if not wanted:
        return TrialListing(lines=[], total=total)
    listed = list_trials(store, run_id, tasks=[t for t, _, _ in wanted], verdict=chosen)
    by_task: dict[str, list[int]] = {}
    for position, line in enumerate(listed.lines):
        by_task.setdefault(line.task_id, []).append(position)
    lines = [
        listed.lines[i] for task_id, low, high in wanted for i in by_task.get(task_id, [])[low:high]
    ]
    return TrialListing(lines=lines, total=total)


_VERDICTS = {v.value: v for v in Verdict}


class ListedTrial(NamedTuple):
    """A trial a task's row links to: its number and verdict."""

    trial: int
    verdict: Verdict


def listed_trials(
    store: Store, run_id: str, tasks: Mapping[str, int], *, most: int = MAX_RESULTS_PER_TASK
) -> dict[str, list[ListedTrial]]:
    """The trials a report lists for each of `tasks` (task id: its trial count), as
    `tally.TaskTally` picks them: all of a task's trials when it has at most `most`, else
    its first `most` non-passing ones; by trial number. Read from the covering index,
    for the tasks of one page only."""
    small = [task for task, n in tasks.items() if n <= most]
    big = [task for task, n in tasks.items() if n > most]
    c = trials.c
    queries = []
    if small:
        queries.append(select(c.task_id, c.idx, c.verdict).where(c.task_id.in_(small)))
    if big:
        not_passed = [v.value for v in Verdict if v is not Verdict.PASS]
        queries.append(
            select(c.task_id, c.idx, c.verdict).where(c.task_id.in_(big), c.verdict.in_(not_passed))
        )
    found: dict[str, list[ListedTrial]] = {task: [] for task in tasks}
    with _read(store, f"list the trials of run {run_id!r}") as conn:
        for query in queries:
            for task_id, idx, verdict in conn.execute(query.where(c.run_id == run_id)):
                # A verdict that is none (changed behind trialkit's back) is an error.
                found[task_id].append(ListedTrial(idx, _VERDICTS.get(verdict, Verdict.ERROR)))
    return {task: sorted(listed)[:most] for task, listed in found.items()}
