"""Human labels in the store: saving one applies it to the trial it names, at once.

A label is kept in `labels` (one per run, task, trial and grader: a later label for the same
key replaces the earlier one) and applied to the trial: the score of its grader takes the
label's verdict and value (no longer pending; the reviewer, time and comment in its metadata),
the trial's verdict is decided again by the rule the runner uses (`trial_verdict`), and the
`trials` and `scores` rows are rewritten. Reports read those rows, so they count the label as
soon as it is saved.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Select, and_, delete, insert, select, true, update

from trialkit._record import Record
from trialkit.graders.base import trial_verdict
from trialkit.graders.human import HUMAN, marked_for_review, pending_score
from trialkit.score import Score, Verdict
from trialkit.store import rows, search_index
from trialkit.store.errors import GraderNotFound, RunNotFound, StoreError, TrialNotFound
from trialkit.store.schema import labels, run_tasks, runs, scores, trials
from trialkit.trial import TrialStatus

if TYPE_CHECKING:
    from trialkit.labels import Label

_GRADERS_SHOWN = 10


class PendingReview(Record):
    """A score waiting for a reviewer: which trial, and which of its graders."""

    run_id: str
    task_id: str
    trial: int
    grader: str


_REVIEW_KEYS = ("reviewer", "labeled_at", "comment")
BEFORE_LABEL = "before_label"
"""Metadata key of what a grader that is not waiting for a reviewer (a judge, a code check)
said before a label overrode it: its verdict, value and rationale, kept for calibration."""


def labelled_score(score: Score, label: Label, labeled_at: str) -> Score:
    """`score` as the label decides it: its verdict and value, no longer pending, with the
    label's reviewer, time (`labeled_at`, as stored) and comment in its metadata instead of
    an earlier label's. A grader's own verdict is kept under `BEFORE_LABEL`."""
    kept = {k: v for k, v in score.metadata.items() if k not in _REVIEW_KEYS}
    if not score.pending and "labeled_at" not in score.metadata:
        said = score.model_dump(mode="json", include={"verdict", "value", "rationale"})
        kept[BEFORE_LABEL] = said
    review = {"reviewer": label.reviewer, "labeled_at": labeled_at, "comment": label.comment}
    who = label.reviewer or "a reviewer"
    return score.model_copy(
        update={
            "verdict": Verdict(label.verdict),
            "value": label.score,
            "pending": False,
            "rationale": label.comment or f"labelled {label.verdict} by {who}",
            "error": None,
            "metadata": kept | {k: v for k, v in review.items() if v is not None},
        }
    )


def apply_label(conn: Connection, label: Label, *, run_id: str) -> None:
    """Store `label` for trial `label.task_id#label.trial` of run `run_id` and apply it.

    Raises `TrialNotFound` (or `RunNotFound`) when there is no such trial, and `GraderNotFound`
    when the trial has no score of `label.grader`, unless the grader is "human" and the task is
    tagged `review`: a trial graded before the tag was added, or one that errored before its
    graders ran, then gets a human score.
    """
    where = f"trial {label.task_id}#{label.trial} of run {run_id!r}"
    key = (
        trials.c.run_id == run_id,
        trials.c.task_id == label.task_id,
        trials.c.idx == label.trial,
    )
    row = conn.execute(select(trials.c.status, trials.c.scores).where(*key)).one_or_none()
    if row is None:
        if conn.scalar(select(runs.c.id).where(runs.c.id == run_id)) is None:
            raise RunNotFound(f"no run with id {run_id!r} in the store")
        raise TrialNotFound(f"run {run_id!r} has no trial {label.task_id}#{label.trial}")
    with rows.decoding(where, "scores"):
        checks = rows.load_scores(row.scores)
        status = TrialStatus(row.status)
    position = _position(checks, label.grader)
    if position is None:
        if label.grader != HUMAN or not _marked_for_review(conn, run_id, label.task_id):
            raise GraderNotFound(_no_grader(where, label.grader, checks))
        checks.append(pending_score())
        position = len(checks) - 1
    labeled_at = rows.dump_datetime(
        label.labeled_at or datetime.now(UTC), f"the labeled_at of the label of {where}"
    )
    checks[position] = labelled_score(checks[position], label, labeled_at)
    verdict = trial_verdict(status, checks)
    conn.execute(
        update(trials).where(*key).values(scores=rows.dump_scores(checks), verdict=verdict.value)
    )
    of_trial = (
        scores.c.run_id == run_id,
        scores.c.task_id == label.task_id,
        scores.c.trial_idx == label.trial,
    )
    conn.execute(delete(scores).where(*of_trial))
    conn.execute(insert(scores), rows.scores_of(run_id, label.task_id, label.trial, checks))
    search_index.reindex_trial(conn, run_id, label.task_id, label.trial)
    same_key = (
        labels.c.run_id == run_id,
        labels.c.task_id == label.task_id,
        labels.c.trial_idx == label.trial,
        labels.c.grader == label.grader,
    )
    conn.execute(delete(labels).where(*same_key))
    conn.execute(insert(labels), _label_row(label, run_id, labeled_at))


def _position(checks: list[Score], grader: str) -> int | None:
    """The score a label for `grader` replaces: its first pending one, else its first one."""
    named = [i for i, s in enumerate(checks) if s.name == grader]
    pending = [i for i in named if checks[i].pending]
    chosen = pending or named
    return chosen[0] if chosen else None


def _marked_for_review(conn: Connection, run_id: str, task_id: str) -> bool:
    tags = conn.scalar(
        select(run_tasks.c.tags).where(run_tasks.c.run_id == run_id, run_tasks.c.task_id == task_id)
    )
    return tags is not None and marked_for_review(rows.load_tags(tags))


def _no_grader(where: str, grader: str, checks: list[Score]) -> str:
    names = list(dict.fromkeys(s.name for s in checks))
    if not names:
        return f"{where} has no scores, so nothing to label as {grader!r}"
    shown = ", ".join(repr(n) for n in names[:_GRADERS_SHOWN])
    if len(names) > _GRADERS_SHOWN:
        shown += ", …"
    return f"{where} has no grader {grader!r}; its graders: {shown}"


def _label_row(label: Label, run_id: str, labeled_at: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "task_id": label.task_id,
        "trial_idx": label.trial,
        "grader": label.grader,
        "verdict": label.verdict,
        "score": label.score,
        "reviewer": label.reviewer,
        "labeled_at": labeled_at,
        "comment": label.comment,
    }


def read_labels(conn: Connection, run_id: str) -> list[Label]:
    """The labels stored for a run, by task id, trial number and grader."""
    query = (
        select(labels)
        .where(labels.c.run_id == run_id)
        .order_by(labels.c.task_id, labels.c.trial_idx, labels.c.grader)
    )
    with rows.decoding(f"run {run_id!r}: a label"):
        return [_label(row) for row in conn.execute(query)]


def _label(row: rows.StoredRow) -> Label:
    from trialkit.labels import Label

    return Label(
        run_id=row.run_id,
        task_id=row.task_id,
        trial=row.trial_idx,
        grader=row.grader,
        verdict=row.verdict,
        score=row.score,
        reviewer=row.reviewer,
        labeled_at=rows.load_datetime(row.labeled_at),
        comment=row.comment,
    )


def _pending_query(run_id: str, grader: str | None = None) -> Select[Any]:
    """The pending scores of a run, in the suite's task order, then by trial and position."""
    query = (
        select(scores.c.task_id, scores.c.trial_idx, scores.c.name)
        .select_from(
            scores.outerjoin(
                run_tasks,
                and_(
                    run_tasks.c.run_id == scores.c.run_id, run_tasks.c.task_id == scores.c.task_id
                ),
            )
        )
        .where(scores.c.run_id == run_id, scores.c.pending == true())
        .order_by(run_tasks.c.position, scores.c.task_id, scores.c.trial_idx, scores.c.position)
    )
    return query if grader is None else query.where(scores.c.name == grader)


def read_pending(conn: Connection, run_id: str, grader: str | None = None) -> list[PendingReview]:
    return [
        PendingReview(run_id=run_id, task_id=row.task_id, trial=row.trial_idx, grader=row.name)
        for row in conn.execute(_pending_query(run_id, grader))
    ]


def pending_counts(conn: Connection, run_id: str) -> dict[str, int]:
    """Per task: how many of its trials have a score waiting for a reviewer."""
    query = (
        select(scores.c.task_id, scores.c.trial_idx)
        .where(scores.c.run_id == run_id, scores.c.pending == true())
        .distinct()
    )
    return Counter(task_id for task_id, _ in conn.execute(query))


def run_of(label: Label, run_id: str | None) -> str:
    """The run a label is for: its own, or `run_id` when it names none."""
    chosen = label.run_id or run_id
    if chosen is None:
        raise StoreError(
            f"the label of {label.task_id}#{label.trial} names no run; give the run it is for"
        )
    return chosen
