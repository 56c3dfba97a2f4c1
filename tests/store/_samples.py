"""Sample records for the store tests, built directly (no runner involved)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

from trialkit._record import ErrorInfo
from trialkit.outcome import Artifact, FileChange, Outcome, WorkspaceDiff
from trialkit.report import RunInfo, SuiteInfo, TaskPlan
from trialkit.score import Assertion, Score, Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import (
    Message,
    ModelCall,
    Reasoning,
    Timing,
    ToolCall,
    Transcript,
    Turn,
    Usage,
)
from trialkit.trial import Trial, TrialStatus

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


@dataclass
class Sample:
    run: RunInfo
    suite: SuiteInfo
    plans: list[TaskPlan]
    trials: list[Trial] = field(default_factory=list)


def make_sample(run_id: str, *, name: str | None = None, started_at: datetime = T0) -> Sample:
    run = RunInfo(
        id=run_id, name=name, started_at=started_at, status="running", config={"trials": 2}
    )
    suite = SuiteInfo(id="capitals", kind=SuiteKind.MIXED, description="Capitals, tools, JSON.")
    plans = [
        TaskPlan(id="france", kind=SuiteKind.REGRESSION, tags=["geo", "smoke"]),
        TaskPlan(id="json", kind=SuiteKind.CAPABILITY, expect="failure"),
        TaskPlan(id="tools", kind=SuiteKind.REGRESSION),
        TaskPlan(id="never-ran", kind=SuiteKind.REGRESSION),
    ]
    trials = [
        make_trial(run_id, "france", 0, output="Paris " * 1000, scores=[_composite_score()]),
        make_trial(
            run_id,
            "france",
            1,
            verdict=Verdict.FAIL,
            output="Berlin",
            scores=[Score.from_bool(False, name="contains", rationale="no 'paris'")],
        ),
        make_trial(
            run_id,
            "json",
            0,
            status=TrialStatus.ERROR,
            verdict=Verdict.ERROR,
            output=None,
            error=ErrorInfo(
                type="RuntimeError",
                message="agent crashed",
                traceback="Traceback (most recent call last):\nRuntimeError: agent crashed\n",
                phase="agent",
            ),
            cost_usd=None,
        ),
        make_trial(
            run_id,
            "json",
            1,
            status=TrialStatus.TIMEOUT,
            verdict=Verdict.ERROR,
            error=ErrorInfo(type="TimeoutError", message="timed out after 60 s", phase="timeout"),
            scores=[
                Score.from_error(
                    ErrorInfo(type="ValueError", message="bad judge answer", phase="grading"),
                    name="judge",
                )
            ],
        ),
        _tool_trial(run_id),
    ]
    return Sample(run=run, suite=suite, plans=plans, trials=trials)


def make_trial(
    run_id: str,
    task_id: str,
    index: int,
    *,
    status: TrialStatus = TrialStatus.COMPLETED,
    verdict: Verdict = Verdict.PASS,
    output: str | None = "ok",
    scores: list[Score] | None = None,
    error: ErrorInfo | None = None,
    cost_usd: float | None = 0.001,
    started_at: datetime = T0,
) -> Trial:
    return Trial(
        run_id=run_id,
        task_id=task_id,
        index=index,
        status=status,
        verdict=verdict,
        outcome=Outcome(output=output),
        scores=scores if scores is not None else [Score.from_bool(True, name="contains")],
        error=error,
        cost_usd=cost_usd,
        started_at=started_at + timedelta(seconds=index),
        duration_s=0.25 + index / 3,
    )


def _composite_score() -> Score:
    return Score(
        name="all_of",
        value=0.75,
        verdict=Verdict.PASS,
        rationale="3 of 4 parts held",
        assertions=[
            Assertion(name="contains", verdict=Verdict.PASS, value=1.0),
            Assertion(
                name="any_of",
                verdict=Verdict.PASS,
                assertions=[
                    Assertion(name="a", verdict=Verdict.FAIL, value=0.0, rationale="missing"),
                    Assertion(name="b", verdict=Verdict.PASS, value=1.0),
                ],
            ),
        ],
        metadata={"threshold": 0.7, "parts": ["contains", "any_of"], "nested": {"x": None}},
    )


def _tool_trial(run_id: str) -> Trial:
    call = ToolCall(
        id="call_1",
        name="read_file",
        arguments={"path": "notes.md", "lines": [1, 2]},
        result="# Notes",
        turn=1,
        started_at=0.5,
        duration_s=0.01,
    )
    usage = Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100, reasoning_tokens=7)
    transcript = Transcript(
        messages=[
            Message(role="system", content="Be brief."),
            Message(role="user", content="Read notes.md"),
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", content="# Notes", name="read_file", tool_call_id="call_1"),
            Message(role="assistant", content="It says Notes."),
        ],
        tool_calls=[call],
        reasoning=[
            Reasoning(content="look at the file", turn=1),
            Reasoning(content="", redacted=True),
        ],
        turns=[
            Turn(
                index=0,
                input=[Message(role="user", content="Read notes.md")],
                output="It says Notes.",
                started_at=0.1,
                duration_s=1.5,
            )
        ],
        model_calls=[
            ModelCall(
                model="openai/gpt-4o-mini",
                request={"messages": [{"role": "user", "content": "Read notes.md"}]},
                response={"choices": [{"message": {"content": "It says Notes."}}]},
                usage=usage,
                cost_usd=0.0123,
                latency_s=0.8,
                retries=1,
            ),
            ModelCall(
                model="judge/model",
                role="grader",
                usage=Usage(input_tokens=9, output_tokens=2),
                cost_usd=0.0004,
            ),
        ],
        usage=usage,
        grader_usage=Usage(input_tokens=9, output_tokens=2),
        timing=Timing(started_at=T0, setup_s=0.1, agent_s=1.5, grading_s=0.2, total_s=1.8),
    )
    outcome = Outcome(
        output="It says Notes.",
        state={"tickets": [{"id": 1, "open": False}], "count": 1},
        artifacts=[Artifact(path="out.txt", content="hello", size=5, media_type="text/plain")],
        diff=WorkspaceDiff(
            files=[
                FileChange(path="notes.md", change="modified", diff="-a\n+b\n", size=2),
                FileChange(path="img.png", change="added", binary=True, size=100),
            ]
        ),
    )
    return Trial(
        run_id=run_id,
        task_id="tools",
        index=0,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS,
        model="openai/gpt-4o-mini",
        transcript=transcript,
        outcome=outcome,
        scores=[
            Score.from_value(0.9, pass_at=0.7, name="judge", rationale="good"),
            Score.from_bool(True, name="tool_called"),
        ],
        usage=usage,
        grader_usage=Usage(input_tokens=9, output_tokens=2),
        cost_usd=0.0127,
        grader_cost_usd=0.0004,
        started_at=datetime(2025, 3, 1, 14, 0, 0, 1, tzinfo=timezone(timedelta(hours=2))),
        duration_s=1.8000000000000003,
    )
