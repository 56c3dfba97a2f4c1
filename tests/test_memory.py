"""What a finished trial leaves in the process is bounded: a run holds running figures, not
its trials (`trialkit.run.tally`), so memory does not grow with the number of trials."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import anyio
import pytest

from trialkit import Runner, Suite, Task, graders
from trialkit.report import Report
from trialkit.store import Store
from trialkit.store.urls import sqlite_url
from trialkit.store.writer_process import MODE_ENV_VAR

TASKS = 5


async def _agent(prompt: str) -> str:
    return f"Paris, as asked in {prompt}. " + "A longer answer with some words in it. " * 40


def _peak(tmp_path: Path, trials: int) -> tuple[int, Report]:
    """The most bytes the run of `trials` trials per task held at once (over what was held
    before it), its report included."""
    suite = Suite(
        id=f"memory-{trials}",
        kind="capability",
        trials=trials,
        harness=_agent,
        tasks=[
            Task(id=f"t{i}", input=f"q{i}", graders=[graders.contains("paris")])
            for i in range(TASKS)
        ],
    )
    with Store(sqlite_url(tmp_path / f"{trials}.db")) as store:
        runner = Runner(store=store, concurrency=10)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        report = anyio.run(runner.run, suite)
        peak = tracemalloc.get_traced_memory()[1]
    return peak - before, report


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_a_run_holds_a_bounded_amount_per_trial(
    tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV_VAR, writer)  # both sizes alike: trials saved here, or not
    tracemalloc.start()
    try:
        _peak(tmp_path, 20)  # imports and caches, paid once
        # Both sizes are past the point where the writer's batches and queue are full, so
        # what they hold at most is the same and only what grows with trials is left.
        small, _ = _peak(tmp_path, 300)
        large, report = _peak(tmp_path, 900)
    finally:
        tracemalloc.stop()
    assert report.summary.trials == TASKS * 900
    assert all(len(task.results) <= 20 for task in report.tasks)
    per_trial = (large - small) / (TASKS * 600)
    # Keeping each trial's result held 4.7 KB per trial here. What is left is a duration
    # (8 bytes a trial); the trials waiting for the store's writer and being saved (at most
    # 512 of them, however many the run has) are held by both sizes alike, give or take
    # where the peak falls.
    assert per_trial < 1000, f"{per_trial:.0f} bytes held per trial ({small=}, {large=})"


def test_kept_records_share_their_field_sets_and_stay_equal() -> None:
    from trialkit._record import share_field_sets
    from trialkit.report import TaskPlan
    from trialkit.task import SuiteKind

    plans = [TaskPlan(id=f"t{i}", kind=SuiteKind.REGRESSION, tags=["a"]) for i in range(3)]
    alone = TaskPlan(id="t0", kind=SuiteKind.REGRESSION, tags=["a"])
    for plan in plans:
        share_field_sets(plan)
    assert plans[0].__pydantic_fields_set__ is plans[2].__pydantic_fields_set__
    assert plans[0] == alone  # what a record is does not change
    assert plans[0].model_dump(exclude_unset=True) == alone.model_dump(exclude_unset=True)
    copied = plans[0].model_copy(update={"line": 3})
    assert "line" in copied.model_fields_set and "line" not in plans[1].model_fields_set


def test_records_inside_records_share_their_field_sets_too() -> None:
    # share_field_sets follows only the fields whose type can hold a record: a task report's
    # results and usage, and through a result its scores, but not its tags or pass@k table.
    from trialkit._record import _holding_fields, share_field_sets
    from trialkit.report import TaskReport, TrialResult
    from trialkit.score import Score

    assert set(_holding_fields(TaskReport)) == {"usage", "grader_usage", "results"}
    assert "scores" in _holding_fields(TrialResult)

    def result(trial: int) -> TrialResult:
        return TrialResult.model_validate(
            {
                "trial": trial,
                "verdict": "pass",
                "status": "completed",
                "scores": [Score.from_bool(True, name="ok").model_dump()],
                "duration_s": 0.1,
            }
        )

    first, second = result(0), result(1)
    share_field_sets(first)
    share_field_sets(second)
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    assert first.scores[0].__pydantic_fields_set__ is second.scores[0].__pydantic_fields_set__
    share_field_sets(second)  # again: nothing changes
    assert second.scores[0] == result(1).scores[0]
