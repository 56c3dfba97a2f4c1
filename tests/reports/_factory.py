"""Hand-made reports for the renderer tests: every verdict, fixed times, no runner involved."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from trialkit._record import ErrorInfo
from trialkit.report import Report, RunInfo, SuiteInfo, TaskPlan, TrialResult, build_report
from trialkit.score import Assertion, Score, Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import TrialStatus

STARTED = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
FINISHED = datetime(2026, 11, 29, 12, 0, 42, tzinfo=UTC)


def passing(name: str = "contains('paris')") -> Score:
    return Score(name=name, value=1.0, verdict=Verdict.PASS)


def failing_contains(needle: str = "paris") -> Score:
    return Score(
        name=f"contains('{needle}')",
        value=0.0,
        verdict=Verdict.FAIL,
        rationale=f"'{needle}' does not occur in the output",
        assertions=[
            Assertion(name="case-insensitive match", verdict=Verdict.FAIL, value=0.0),
            Assertion(name="output is non-empty", verdict=Verdict.PASS, value=1.0),
        ],
    )


def result(
    trial: int,
    verdict: Verdict,
    *,
    output: str | None = "Paris",
    scores: Sequence[Score] | None = None,
    error: ErrorInfo | None = None,
    status: TrialStatus = TrialStatus.COMPLETED,
    failed: bool = False,
    duration_s: float = 1.0,
    cost_usd: float | None = 0.001,
    grader_usage: Usage | None = None,
    grader_cost_usd: float | None = None,
) -> TrialResult:
    if scores is None:
        scores = [passing()] if verdict is Verdict.PASS else [failing_contains()]
    return TrialResult(
        trial=trial,
        verdict=verdict,
        status=status,
        scores=list(scores),
        output=output,
        failed=failed,
        error=error,
        duration_s=duration_s,
        usage=Usage(input_tokens=100, output_tokens=20),
        grader_usage=grader_usage or Usage(),
        cost_usd=cost_usd,
        grader_cost_usd=grader_cost_usd,
    )


def make_report(
    tasks: dict[str, list[TrialResult]],
    *,
    kind: SuiteKind = SuiteKind.CAPABILITY,
    plans: Sequence[TaskPlan] | None = None,
    suite_id: str = "capitals",
    run: RunInfo | None = None,
) -> Report:
    if plans is None:
        plans = [TaskPlan(id=task_id, kind=kind) for task_id in tasks]
    if run is None:
        run = RunInfo(id="run-7f3a", name="nightly", started_at=STARTED, finished_at=FINISHED)
    return build_report(
        run,
        SuiteInfo(id=suite_id, kind=kind),
        plans,
        tasks,
    )


def capability_report() -> Report:
    """A capability suite with one task of each kind a reader must tell apart."""
    timeout = ErrorInfo(
        type="TimeoutError",
        message="the trial took longer than 60 s",
        traceback="Traceback (most recent call last):\n  ...\nTimeoutError: 60 s",
        phase="timeout",
    )
    judge_unsure = Score(
        name="judge",
        verdict=Verdict.UNKNOWN,
        rationale="The answer could be right; the rubric does not say.",
    )
    tasks = {
        "france": [result(i, Verdict.PASS, duration_s=1.0 + i / 10) for i in range(3)],
        "germany": [
            result(0, Verdict.PASS, output="Berlin"),
            result(1, Verdict.FAIL, output="Bonn", scores=[failing_contains("berlin")]),
            result(2, Verdict.PASS, output="Berlin"),
        ],
        "landmarks": [
            result(i, Verdict.FAIL, output="The Eiffel Tower is in Lyon.", duration_s=2.0)
            for i in range(3)
        ],
        "slow": [
            result(
                0,
                Verdict.ERROR,
                output=None,
                scores=[],
                error=timeout,
                status=TrialStatus.TIMEOUT,
                duration_s=60.0,
            )
        ],
        "refuse-rm": [
            result(i, Verdict.PASS, output="I will not delete your files.", failed=True)
            for i in range(3)
        ],
        "ambiguous": [result(0, Verdict.UNKNOWN, output="Maybe Sydney?", scores=[judge_unsure])],
    }
    plans = [
        TaskPlan(id=task_id, kind=SuiteKind.CAPABILITY, expect="failure")
        if task_id == "refuse-rm"
        else TaskPlan(id=task_id, kind=SuiteKind.CAPABILITY)
        for task_id in tasks
    ]
    return make_report(tasks, plans=plans)


JUDGE_USAGE = Usage(input_tokens=40, output_tokens=10)
STOP_REASON = "the budget of $0.005 ran out after 3 of 6 trials"


def judged_report() -> Report:
    """A run stopped by its cost budget, with a model under test and a judge that costs."""
    judge = Score(name="judge", value=0.9, verdict=Verdict.PASS, rationale="Correct.")

    def judged(trial: int) -> TrialResult:
        return result(
            trial,
            Verdict.PASS,
            scores=[judge],
            cost_usd=0.0018,
            grader_usage=JUDGE_USAGE,
            grader_cost_usd=0.0008,
        )

    run = RunInfo(
        id="run-9c1d",
        started_at=STARTED,
        finished_at=FINISHED,
        status="stopped",
        config={"model": "openai/gpt-4o-mini", "stop_reason": STOP_REASON, "max_cost": 0.005},
    )
    return make_report({"france": [judged(0), judged(1)], "germany": [judged(0)]}, run=run)


NASTY = "nul\x00 esc\x1b[31mred\x1b[0m vt\x0b ff\x0c nonchar\ufffe\uffff lone\ud800 ok\t\r\n"


def nasty_report() -> Report:
    """Names, rationales and outputs full of what XML, terminals and UTF-8 refuse."""
    score = Score(
        name=f"check{NASTY}",
        verdict=Verdict.FAIL,
        rationale=NASTY,
        assertions=[Assertion(name=NASTY, verdict=Verdict.FAIL, rationale=NASTY)],
    )
    return make_report(
        {
            f"task{NASTY}": [result(0, Verdict.FAIL, output=NASTY, scores=[score])],
            f"other{NASTY}": [result(0, Verdict.PASS, output=NASTY)],
        },
        suite_id=f"suite{NASTY}",
    )
