"""One trial-verdict rule: the runner and a label applied later decide a trial's verdict alike."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from trialkit import Suite, Task, graders, run_sync
from trialkit._record import ErrorInfo
from trialkit.graders.base import trial_verdict
from trialkit.graders.human import HUMAN, REVIEW_TAG, pending_score
from trialkit.harness.base import HarnessError
from trialkit.labels import Label
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.trial import TrialStatus

KINDS = ("pass", "fail", "error", "unknown", "pending")
COMBINED = {
    "pass": Verdict.PASS,
    "fail": Verdict.FAIL,
    "error": Verdict.ERROR,
    "unknown": Verdict.UNKNOWN,
    "pending": Verdict.UNKNOWN,  # waiting for a reviewer: not a pass yet
}
CASES = [(status, kind) for status in TrialStatus for kind in KINDS]


def score_of(kind: str, name: str = "check") -> Score:
    if kind == "pass":
        return Score.from_bool(True, name=name)
    if kind == "fail":
        return Score.from_bool(False, name=name)
    if kind == "error":
        return Score.from_error(ErrorInfo(type="ValueError", message="boom"), name=name)
    if kind == "unknown":
        return Score(name=name, verdict=Verdict.UNKNOWN)
    return pending_score("second_look")


def expected(status: TrialStatus, kind: str) -> Verdict:
    return COMBINED[kind] if status is TrialStatus.COMPLETED else Verdict.ERROR


@pytest.mark.parametrize(("status", "kind"), CASES)
def test_the_rule(status: TrialStatus, kind: str) -> None:
    assert trial_verdict(status, [score_of(kind)]) is expected(status, kind)
    passed = Score.from_bool(True, name="other")
    assert trial_verdict(status, [passed, score_of(kind)]) is expected(status, kind)
    failed = Score.from_bool(False, name="other")
    assert trial_verdict(status, [score_of(kind), failed]) is (
        Verdict.FAIL if status is TrialStatus.COMPLETED else Verdict.ERROR
    )


async def agent(prompt: str) -> str:
    if prompt == "completed":
        return "done"
    if prompt == TrialStatus.TIMEOUT:
        await anyio.sleep(30)
    if prompt == "broken":
        raise HarnessError("the harness broke")
    raise RuntimeError("the agent gave up")


def fixed(score: Score) -> graders.FunctionGrader:
    return graders.grader(name=score.name)(lambda ctx: score.model_copy(deep=True))


def tasks(*, review: bool) -> list[Task]:
    """A task per (status, kind), and tasks expected to fail. With `review` each waits for a
    human label; without, a passing check named "human" stands for that label."""
    label = [] if review else [fixed(score_of("pass", HUMAN))]
    tags = [REVIEW_TAG] if review else []
    made = [
        Task(
            id=f"{status}-{kind}",
            input=status.value,
            graders=[fixed(score_of(kind)), *label],
            tags=tags,
            timeout=0.5,
        )
        for status, kind in CASES
    ]
    for input_, name in (("error", "failed-as-expected"), ("broken", "harness-broke")):
        made.append(
            Task(
                id=name,
                input=input_,
                expect="failure",
                graders=[graders.agent_failed(), *label],
                tags=tags,
            )
        )
    made.append(Task(id="timed-out", input="timeout", expect="failure", tags=tags, timeout=0.5))
    return made


def test_the_runner_and_a_later_label_agree(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    graded = run_sync(Suite(id="s", harness=agent, tasks=tasks(review=False)), concurrency=8)
    waiting = run_sync(
        Suite(id="s", harness=agent, tasks=tasks(review=True)), concurrency=8, store=url
    )
    store = Store(url)
    try:
        labels = [Label(task_id=t.id, trial=0, verdict="pass") for t in waiting.tasks]
        store.save_labels(labels, run_id=waiting.run.id)
        labelled = {t.id: store.load_trial(waiting.run.id, t.id, 0) for t in waiting.tasks}
    finally:
        store.close()

    for task in graded.tasks:
        (result,) = task.results
        assert result.verdict is trial_verdict(result.status, result.scores), task.id
    for trial in labelled.values():
        assert trial.verdict is trial_verdict(trial.status, trial.scores), trial.task_id
        (human,) = [s for s in trial.scores if s.name == HUMAN]
        assert (human.verdict, human.pending) == (Verdict.PASS, False)
    at_run_time = {t.id: (t.results[0].status, t.results[0].verdict) for t in graded.tasks}
    after_label = {t: (trial.status, trial.verdict) for t, trial in labelled.items()}
    assert after_label == at_run_time
    for status, kind in CASES:
        assert at_run_time[f"{status}-{kind}"] == (status, expected(status, kind))
    assert at_run_time["failed-as-expected"] == (TrialStatus.COMPLETED, Verdict.PASS)
    assert at_run_time["harness-broke"] == (TrialStatus.ERROR, Verdict.ERROR)
    assert at_run_time["timed-out"] == (TrialStatus.TIMEOUT, Verdict.ERROR)
