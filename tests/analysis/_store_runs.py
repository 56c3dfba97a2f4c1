"""Runs written straight to a store from a compact spelling of their trials, for the tests of
`compare` and `health`.

A task's trials are a string, one letter per trial: `P` pass, `F` fail, `E` the agent errored,
`G` the grader `judge` errored (trial verdict error), `U` the judge could not tell (unknown).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trialkit._record import ErrorInfo
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.task import SuiteKind
from trialkit.trial import Trial, TrialStatus

T0 = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)

_VERDICTS = {
    "P": Verdict.PASS,
    "F": Verdict.FAIL,
    "E": Verdict.ERROR,
    "G": Verdict.ERROR,
    "U": Verdict.UNKNOWN,
}


def trial(run_id: str, task_id: str, index: int, letter: str, **fields: object) -> Trial:
    verdict = _VERDICTS[letter]
    if letter == "E":
        scores: list[Score] = []
        error = ErrorInfo(type="RuntimeError", message="agent crashed", phase="agent")
        status = TrialStatus.ERROR
    elif letter == "G":
        bad = ErrorInfo(type="ValueError", message="unparseable judge answer", phase="grading")
        scores, error, status = [Score.from_error(bad, name="judge")], None, TrialStatus.COMPLETED
    elif letter == "U":
        scores = [Score(name="judge", verdict=Verdict.UNKNOWN, rationale="cannot tell")]
        error, status = None, TrialStatus.COMPLETED
    else:
        scores = [Score.from_bool(letter == "P", name="contains")]
        error, status = None, TrialStatus.COMPLETED
    return Trial.model_validate(
        {
            "run_id": run_id,
            "task_id": task_id,
            "index": index,
            "status": status,
            "verdict": verdict,
            "scores": scores,
            "error": error,
            "started_at": T0,
            "duration_s": 1.0,
            **fields,
        }
    )


def write_run(
    store: Store,
    run_id: str,
    tasks: dict[str, str],
    *,
    suite: str = "suite",
    kind: SuiteKind = SuiteKind.REGRESSION,
    hours: float = 0,
    model: str | None = None,
    config: dict[str, object] | None = None,
    trial_model: str | None = None,
    cost_usd: float | None = None,
    duration_s: float = 1.0,
) -> None:
    """A finished run of `suite` started `hours` after `T0`; `model` is its setting."""
    started = T0 + timedelta(hours=hours)
    settings: dict[str, object] = {"model": model, "harness": "chat" if model else "agent"}
    settings |= config or {}
    run = RunInfo(id=run_id, started_at=started, status="running", config=settings)
    plans = [TaskPlan(id=task_id, kind=kind) for task_id in tasks]
    store.create_run(run, SuiteInfo(id=suite, kind=kind), plans)
    store.save_trials(
        [
            trial(
                run_id,
                task_id,
                index,
                letter,
                model=trial_model,
                cost_usd=cost_usd,
                duration_s=duration_s,
            )
            for task_id, letters in tasks.items()
            for index, letter in enumerate(letters)
        ]
    )
    store.finish_run(
        run.model_copy(
            update={"status": "completed", "finished_at": started + timedelta(minutes=5)}
        )
    )
