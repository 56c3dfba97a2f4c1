"""Labels in the store: saved, applied to their trial's score and verdict, counted by reports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from trialkit.graders.human import HUMAN, REVIEW_TAG, pending_score
from trialkit.labels import Label
from trialkit.report import RunInfo, SuiteInfo, TaskPlan, TrialResult, build_report
from trialkit.score import Score, Verdict
from trialkit.store import RunNotFound, Store, StoreError, TrialNotFound
from trialkit.store.errors import GraderNotFound
from trialkit.store.labels import BEFORE_LABEL, PendingReview
from trialkit.store.schema import labels as labels_table
from trialkit.store.schema import scores as scores_table
from trialkit.task import SuiteKind
from trialkit.trial import Trial, TrialStatus

from ._samples import T0, make_trial

RUN = "run-review"
AT = datetime(2025, 3, 2, 9, 30, tzinfo=timezone(timedelta(hours=1)))
PLANS = [
    TaskPlan(id="tone", kind=SuiteKind.REGRESSION),
    TaskPlan(id="facts", kind=SuiteKind.REGRESSION, tags=[REVIEW_TAG]),
    TaskPlan(id="refuse", kind=SuiteKind.REGRESSION, expect="failure"),
    TaskPlan(id="code", kind=SuiteKind.REGRESSION),
]


def waiting(task_id: str, index: int, *checks: Score, status: TrialStatus | None = None) -> Trial:
    verdict = Verdict.ERROR if status else Verdict.UNKNOWN
    if any(c.verdict is Verdict.FAIL for c in checks):
        verdict = Verdict.FAIL
    return make_trial(
        RUN,
        task_id,
        index,
        verdict=verdict,
        status=status or TrialStatus.COMPLETED,
        scores=list(checks),
    )


def passing() -> Score:
    return Score.from_bool(True, name="contains")


@pytest.fixture
def reviewed(store: Store) -> Store:
    """A run whose "tone" trials wait for a reviewer (one also failed a code check), a "facts"
    trial of a task tagged for review, an expect-failure trial, and a plain passing one."""
    run = RunInfo(id=RUN, name="nightly", started_at=T0, status="completed", finished_at=T0)
    store.create_run(run, SuiteInfo(id="s", kind=SuiteKind.REGRESSION), PLANS)
    refusal = Score.from_bool(True, name="agent_failed")
    store.save_trials(
        [
            waiting("tone", 0, passing(), pending_score(instructions="Polite?")),
            waiting("tone", 1, Score.from_bool(False, name="contains"), pending_score()),
            waiting("facts", 0, passing(), pending_score("accuracy"), pending_score()),
            waiting("refuse", 0, refusal, pending_score()),
            make_trial(RUN, "code", 0, scores=[passing()]),
        ]
    )
    return store


def label(task_id: str, index: int, verdict: str = "pass", **fields: object) -> Label:
    values: dict[str, object] = {"reviewer": "ana", "labeled_at": AT, **fields}
    return Label.model_validate(
        {"run_id": RUN, "task_id": task_id, "trial": index, "verdict": verdict, **values}
    )


def scores_rows(store: Store, task_id: str, index: int) -> list[tuple[str, str, object, bool]]:
    with store._engine.connect() as conn:
        query = (
            select(scores_table.c.name, scores_table.c.verdict, scores_table.c.value)
            .add_columns(scores_table.c.pending)
            .where(scores_table.c.task_id == task_id, scores_table.c.trial_idx == index)
            .order_by(scores_table.c.position)
        )
        return [tuple(row) for row in conn.execute(query)]


def test_pending_reviews_are_found_in_sql_in_task_order(reviewed: Store) -> None:
    pending = reviewed.pending_reviews(RUN)

    assert [(p.task_id, p.trial, p.grader) for p in pending] == [
        ("tone", 0, HUMAN),
        ("tone", 1, HUMAN),
        ("facts", 0, "accuracy"),
        ("facts", 0, HUMAN),
        ("refuse", 0, HUMAN),
    ]
    assert pending[0] == PendingReview(run_id=RUN, task_id="tone", trial=0, grader=HUMAN)
    assert [p.task_id for p in reviewed.pending_reviews(RUN, grader="accuracy")] == ["facts"]
    with pytest.raises(RunNotFound):
        reviewed.pending_reviews("no-such-run")


def test_a_pass_label_passes_the_trial_and_the_report_counts_it(reviewed: Store) -> None:
    before = reviewed.load_report(RUN)
    assert (before.summary.pending, before.summary.unknown) == (4, 3)

    reviewed.save_label(label("tone", 0, score=0.8, comment="warm and clear"))

    trial = reviewed.load_trial(RUN, "tone", 0)
    assert trial.verdict is Verdict.PASS
    human = trial.scores[1]
    assert (human.name, human.verdict, human.value, human.pending) == (
        HUMAN,
        Verdict.PASS,
        0.8,
        False,
    )
    assert human.rationale == "warm and clear"
    assert human.metadata == {
        "instructions": "Polite?",
        "reviewer": "ana",
        "labeled_at": "2025-03-02T08:30:00.000000+00:00",
        "comment": "warm and clear",
    }
    assert scores_rows(reviewed, "tone", 0) == [
        ("contains", "pass", 1.0, False),
        (HUMAN, "pass", 0.8, False),
    ]
    after = reviewed.load_report(RUN)
    assert after.task("tone").passed == 1
    assert (after.summary.passed, after.summary.pending, after.summary.unknown) == (2, 3, 2)
    assert [p.task_id for p in reviewed.pending_reviews(RUN)][:1] == ["tone"]


def test_a_fail_label_fails_the_trial_and_its_task(reviewed: Store) -> None:
    reviewed.save_label(label("tone", 0, "fail"))

    trial = reviewed.load_trial(RUN, "tone", 0)
    assert trial.verdict is Verdict.FAIL
    assert trial.scores[1].value == 0.0
    assert trial.scores[1].rationale == "labelled fail by ana"
    report = reviewed.load_report(RUN)
    assert report.task("tone").verdict is Verdict.FAIL
    assert report.summary.failed == 2


def test_a_pass_label_does_not_hide_a_failed_check(reviewed: Store) -> None:
    reviewed.save_label(label("tone", 1, "pass"))

    assert reviewed.load_trial(RUN, "tone", 1).verdict is Verdict.FAIL


def test_an_unknown_label_is_no_longer_pending_but_decides_nothing(reviewed: Store) -> None:
    reviewed.save_label(label("refuse", 0, "unknown", reviewer=None))

    trial = reviewed.load_trial(RUN, "refuse", 0)
    assert trial.verdict is Verdict.UNKNOWN
    assert not trial.scores[1].pending
    assert trial.scores[1].rationale == "labelled unknown by a reviewer"
    assert ("refuse", 0) not in {(p.task_id, p.trial) for p in reviewed.pending_reviews(RUN)}


def test_every_pending_grader_of_a_trial_needs_its_label(reviewed: Store) -> None:
    reviewed.save_label(label("facts", 0, grader="accuracy"))
    assert reviewed.load_trial(RUN, "facts", 0).verdict is Verdict.UNKNOWN

    reviewed.save_label(label("facts", 0))

    assert reviewed.load_trial(RUN, "facts", 0).verdict is Verdict.PASS


def test_an_expect_failure_trial_passes_when_the_reviewer_agrees(reviewed: Store) -> None:
    reviewed.save_label(label("refuse", 0, "pass"))

    assert reviewed.load_trial(RUN, "refuse", 0).verdict is Verdict.PASS


def test_a_later_label_for_the_same_trial_and_grader_replaces_the_earlier(
    reviewed: Store,
) -> None:
    reviewed.save_label(label("tone", 0, "fail", comment="rude"))
    later = label("tone", 0, "pass", reviewer="bo", labeled_at=AT + timedelta(hours=1))
    reviewed.save_label(later)

    assert reviewed.labels(RUN) == [
        later.model_copy(update={"score": 1.0, "labeled_at": later.labeled_at})
    ]
    trial = reviewed.load_trial(RUN, "tone", 0)
    assert trial.verdict is Verdict.PASS
    assert trial.scores[1].metadata["reviewer"] == "bo"
    assert "comment" not in trial.scores[1].metadata
    assert len(trial.scores) == 2


def test_labels_keep_their_reviewer_time_and_comment(reviewed: Store) -> None:
    reviewed.save_labels(
        [
            label("tone", 0, comment="fine"),
            label("refuse", 0, "fail", reviewer=None, labeled_at=None, score=0.2),
        ]
    )
    before = datetime.now(UTC)

    stored = reviewed.labels(RUN)

    assert [(lb.task_id, lb.verdict, lb.score, lb.reviewer, lb.comment) for lb in stored] == [
        ("refuse", "fail", 0.2, None, None),
        ("tone", "pass", 1.0, "ana", "fine"),
    ]
    assert stored[1].labeled_at == AT
    assert stored[1].labeled_at is not None and stored[1].labeled_at.utcoffset() == timedelta(0)
    assert stored[0].labeled_at is not None
    assert before - timedelta(minutes=5) < stored[0].labeled_at <= before
    assert all(lb.run_id == RUN and lb.grader == HUMAN for lb in stored)


def test_a_label_for_a_code_check_keeps_what_the_check_said(reviewed: Store) -> None:
    reviewed.save_label(label("tone", 1, "pass", grader="contains", comment="close enough"))
    reviewed.save_label(label("tone", 1, "fail", grader="contains"))

    check = reviewed.load_trial(RUN, "tone", 1).scores[0]
    assert (check.verdict, check.value, check.rationale) == (
        Verdict.FAIL,
        0.0,
        "labelled fail by ana",
    )
    assert check.metadata[BEFORE_LABEL] == {"verdict": "fail", "value": 0.0, "rationale": None}
    assert "comment" not in check.metadata
    human = reviewed.load_trial(RUN, "tone", 1).scores[1]
    assert human.pending


def test_a_label_for_a_trial_that_does_not_exist_is_an_error(reviewed: Store) -> None:
    with pytest.raises(TrialNotFound, match=r"run 'run-review' has no trial tone#7"):
        reviewed.save_label(label("tone", 7))
    with pytest.raises(TrialNotFound, match="no trial ghost#0"):
        reviewed.save_label(label("ghost", 0))
    with pytest.raises(RunNotFound, match="no run with id 'other'"):
        reviewed.save_label(label("tone", 0, run_id="other"))
    assert reviewed.labels(RUN) == []


def test_a_label_for_a_grader_the_trial_does_not_have_is_an_error(reviewed: Store) -> None:
    with pytest.raises(GraderNotFound) as caught:
        reviewed.save_label(label("tone", 0, grader="judge"))
    assert str(caught.value) == (
        "trial tone#0 of run 'run-review' has no grader 'judge'; its graders: 'contains', 'human'"
    )
    with pytest.raises(GraderNotFound, match="has no grader 'human'"):
        reviewed.save_label(label("code", 0))  # not tagged for review
    assert reviewed.load_trial(RUN, "code", 0).scores == [passing()]


def test_a_human_label_on_a_task_tagged_review_adds_the_missing_score(reviewed: Store) -> None:
    crashed = waiting("facts", 1, status=TrialStatus.ERROR)
    graded_before = waiting("facts", 2, passing())
    reviewed.save_trials([crashed, graded_before.model_copy(update={"verdict": Verdict.PASS})])

    reviewed.save_labels([label("facts", 1, "pass"), label("facts", 2, "fail")])

    errored = reviewed.load_trial(RUN, "facts", 1)
    assert [s.name for s in errored.scores] == [HUMAN]
    assert BEFORE_LABEL not in errored.scores[0].metadata
    assert errored.verdict is Verdict.ERROR  # a trial that did not complete stays an error
    relabelled = reviewed.load_trial(RUN, "facts", 2)
    assert [(s.name, s.verdict) for s in relabelled.scores] == [
        ("contains", Verdict.PASS),
        (HUMAN, Verdict.FAIL),
    ]
    assert relabelled.verdict is Verdict.FAIL
    with pytest.raises(GraderNotFound):
        reviewed.save_label(label("facts", 1, grader="style"))


def test_saving_labels_is_all_or_nothing(reviewed: Store) -> None:
    with pytest.raises(TrialNotFound):
        reviewed.save_labels([label("tone", 0), label("refuse", 0), label("tone", 9)])

    assert reviewed.labels(RUN) == []
    assert reviewed.load_trial(RUN, "tone", 0).verdict is Verdict.UNKNOWN
    assert len(reviewed.pending_reviews(RUN)) == 5


def test_a_label_needs_a_run(reviewed: Store) -> None:
    unnamed = label("tone", 0, run_id=None)
    with pytest.raises(StoreError, match="names no run"):
        reviewed.save_label(unnamed)

    reviewed.save_label(unnamed, run_id=RUN)

    assert reviewed.load_trial(RUN, "tone", 0).verdict is Verdict.PASS


def test_a_naive_labeled_at_is_refused(reviewed: Store) -> None:
    with pytest.raises(StoreError, match="naive datetime"):
        reviewed.save_label(label("tone", 0, labeled_at=datetime(2025, 3, 2, 9, 30)))

    assert reviewed.labels(RUN) == []


def test_a_trial_saved_again_loses_its_labels(reviewed: Store) -> None:
    reviewed.save_label(label("tone", 0))

    reviewed.save_trials([waiting("tone", 0, passing(), pending_score())])

    assert reviewed.labels(RUN) == []
    with reviewed._engine.connect() as conn:
        assert conn.execute(select(labels_table)).all() == []
    assert ("tone", 0) in {(p.task_id, p.trial) for p in reviewed.pending_reviews(RUN)}


@pytest.mark.parametrize("max_results", [0, 1, 20])
def test_the_stored_report_after_labels_is_the_report_in_memory(
    reviewed: Store, max_results: int
) -> None:
    reviewed.save_labels([label("tone", 0, score=0.5), label("facts", 0, "fail")])
    trials = [
        reviewed.load_trial(RUN, task, index)
        for task, index in [("tone", 0), ("tone", 1), ("facts", 0), ("refuse", 0), ("code", 0)]
    ]
    results: dict[str, list[TrialResult]] = {}
    for trial in trials:
        results.setdefault(trial.task_id, []).append(TrialResult.from_trial(trial))
    report = reviewed.load_report(RUN, max_results=max_results)

    expected = build_report(report.run, report.suite, PLANS, results, max_results=max_results)
    assert report.model_dump() == expected.model_dump()
    assert [t.pending for t in report.tasks] == [1, 1, 1, 0]
    assert report.summary.pending == 3
