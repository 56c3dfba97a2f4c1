"""The `human` grader: a pending score that keeps a trial from passing until someone labels it."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from trialkit import GradeContext, Outcome, Suite, Task, Transcript, graders, run_sync
from trialkit.graders.human import (
    HUMAN,
    PENDING_RATIONALE,
    REVIEW_TAG,
    human,
    pending_score,
    with_review,
)
from trialkit.report import Report
from trialkit.reports import render_terminal
from trialkit.score import Verdict


def ctx_of(task: Task) -> GradeContext:
    return GradeContext(task=task, trial_index=0, transcript=Transcript(), outcome=Outcome())


def answer(prompt: str) -> str:
    return "Paris" if "France" in prompt else "no idea"


def run(*tasks: Task, kind: Any = "regression", trials: int = 1) -> Report:
    return run_sync(Suite(id="s", kind=kind, trials=trials, harness=answer, tasks=list(tasks)))


def test_a_human_grader_leaves_a_pending_unknown_score_with_what_the_reviewer_needs() -> None:
    task = Task(id="t", input="Say hi", criteria="Friendly.", reference="Hi!")

    score = human(instructions="Is it friendly?").grade(ctx_of(task))

    assert score.pending
    assert score.verdict is Verdict.UNKNOWN
    assert score.value is None
    assert score.name == HUMAN
    assert score.rationale == PENDING_RATIONALE
    assert score.metadata == {
        "instructions": "Is it friendly?",
        "criteria": "Friendly.",
        "reference": "Hi!",
    }


def test_a_human_grader_can_be_named_and_keeps_only_the_facts_it_has() -> None:
    score = human("tone").grade(ctx_of(Task(id="t", input="x")))

    assert score.name == "tone"
    assert score.metadata == {}
    assert pending_score("tone") == score


@pytest.mark.parametrize("name", ["", "  "])
def test_a_human_grader_needs_a_name(name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        human(name)


def test_a_pending_score_makes_the_trial_unknown_never_a_pass() -> None:
    report = run(
        Task(id="waits", input="Capital of France?", graders=[graders.contains("paris"), human()]),
        Task(id="fails", input="Capital of Peru?", graders=[graders.contains("lima"), human()]),
        Task(id="plain", input="Capital of France?", graders=[graders.contains("paris")]),
    )

    verdicts = {t.id: [r.verdict for r in t.results] for t in report.tasks}
    assert verdicts == {
        "waits": [Verdict.UNKNOWN],
        "fails": [Verdict.FAIL],  # a failed check still shows while the review waits
        "plain": [Verdict.PASS],
    }
    assert [t.pending for t in report.tasks] == [1, 1, 0]
    s = report.summary
    assert (s.passed, s.failed, s.unknown, s.pending) == (1, 1, 1, 2)
    assert s.pass_rate == 0.5  # the pending trial is not decided
    assert report.task("waits").verdict is Verdict.UNKNOWN
    gate = report.gate()
    assert gate.exit_code == 1
    assert "waits" in gate.reasons[0]


def test_a_capability_task_waiting_for_review_is_not_passed() -> None:
    report = run(
        Task(id="t", input="Capital of France?", graders=[human()]), kind="capability", trials=3
    )

    task = report.task("t")
    assert task.verdict is Verdict.UNKNOWN
    assert (task.passed, task.unknown, task.pending) == (0, 3, 3)
    assert task.pass_rate is None


def test_reports_say_how_many_trials_wait_for_review() -> None:
    report = run(Task(id="t", input="Capital of France?", graders=[human()]))

    assert '"pending": 1' in report.to_json()
    assert f"| Pending review | 1 of 1 trials (`trialkit review {report.run.id}`) |" in (
        report.to_markdown()
    )
    assert "<skipped" in report.to_junit()  # unknown: neither passed nor failed
    console = Console(width=120, record=True, color_system=None)
    render_terminal(report, console)
    text = console.export_text()
    assert f"Pending review: 1 of 1 trials (trialkit review {report.run.id})" in text
    assert "1 pending review" in text


def test_reports_of_runs_with_nothing_pending_do_not_mention_review() -> None:
    report = run(Task(id="t", input="Capital of France?", graders=[graders.contains("paris")]))

    assert report.summary.pending == 0
    assert "Pending review" not in report.to_markdown()


def test_a_task_tagged_review_gets_one_human_grader() -> None:
    code = graders.contains("paris")
    tagged = Task(id="t", input="x", tags=[REVIEW_TAG])

    added = with_review([code], tagged)

    assert added[0] is code
    assert [g.name for g in added] == ["contains('paris')", HUMAN]
    assert with_review(added, tagged) == added  # never twice
    assert with_review([code], Task(id="u", input="x")) == [code]
    own = human(instructions="Check the tone.")
    assert with_review([own], tagged) == [own]
