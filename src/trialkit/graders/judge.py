"""Model graders: `judge` grades against a rubric; `majority` and `mean` combine several.

```python
judge("Names Paris and nothing false.", must_fail=["Berlin.", "Paris, or maybe Lyon."])
```

A judge asks its model for a structured answer (a JSON Schema response, or a forced tool call)
or, for models without either, a `SCORE:` line, and turns it into a score. An answer it cannot
read is an error, never a guess. Negative controls (`must_fail`, `must_pass`) are graded once
per run before the judge is trusted; a judge that gets one wrong turns every score it gives
into an error naming that control.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, get_args

import anyio

from trialkit._record import ErrorInfo
from trialkit.graders._judge_protocol import (
    JudgeAnswerError,
    Material,
    Protocol,
    Scale,
    build_request,
    calls_text,
    diff_text,
    parse_answer,
    render_input,
)
from trialkit.graders._judge_repeats import combine_answers
from trialkit.graders.base import GradeContext, Grader, GraderLike
from trialkit.graders.compose import _Composite, _grade_all
from trialkit.models.base import GenerationConfig, Model
from trialkit.models.context import ModelSettings, current_settings
from trialkit.models.managed import ManagedModel
from trialkit.models.registry import check_model_id, get_model
from trialkit.score import Score, Verdict
from trialkit.transcript import TranscriptRecorder, activate, deactivate

Include = Literal["input", "criteria", "reference", "tool_calls", "diff"]
ProtocolChoice = Literal["auto", "json", "tool", "text"]
DEFAULT_INCLUDE: tuple[Include, ...] = ("input", "criteria", "reference")

JUDGES_KEY = "judges"
"""The metadata of a `majority` or `mean` score naming its parts that are judges (the raters
`trialkit agreement` compares), whatever they are called."""

CONTROLS = "judge-controls"
"""The task id of the recorder that collects the controls' calls (they belong to no task)."""

NO_MODEL = (
    "no model to judge with: name one with judge(..., model=...) (`model:` in a suite file), "
    "pass --judge-model, or give the suite a model (by id)"
)

_TOOL_CHOICE_PROVIDERS = {"anthropic"}
"""Providers without a JSON Schema response format that do take a forced tool call (the
`Model` interface has no hook that says so yet)."""


@dataclass(frozen=True)
class Control:
    """An output whose verdict is known, graded to check a judge before its scores count.

    `input`, `criteria` and `reference` are what the judge is shown with it; a control belongs
    to no trial, so it carries its own.
    """

    output: str
    input: str | None = None
    criteria: str | None = None
    reference: str | None = None

    def material(self) -> Material:
        return Material(
            output=self.output, input=self.input, criteria=self.criteria, reference=self.reference
        )


class judge(Grader):
    """A model grades the trial's output against `rubric`.

    Without `pass_at` the judge answers pass (1) or fail (0); with it, a score in [0, 1] that
    passes at `pass_at`. Either way it may answer unknown (verdict `unknown`). The model is
    `model`, else the run's `--judge-model`. `protocol` picks how it answers: `json` (a JSON
    Schema response), `tool` (a forced tool call), `text` (a `SCORE:` line), or `auto` (`json`
    when the model supports it, `tool` for Anthropic, `text` otherwise).

    The judge sees the task's input, criteria and reference and the output; `include` narrows
    that or adds `tool_calls` (the agent's calls, one line each) and `diff` (the workspace diff).
    `must_fail` / `must_pass` are negative (and positive) controls: outputs, or `Control`s with
    their own input, that the judge must fail (pass) before its scores count. Generation runs
    at temperature 0 unless `config` sets one.

    `repeats` asks the judge that many times on each output: the score keeps every answer
    (`metadata["answers"]`) and its verdict is their majority (a tie is unknown); reports,
    `trialkit calibrate` and `trialkit health` give how often the verdicts flip.
    """

    def __init__(
        self,
        rubric: str,
        *,
        pass_at: float | None = None,
        model: str | Model | None = None,
        protocol: ProtocolChoice = "auto",
        include: Sequence[Include] = DEFAULT_INCLUDE,
        must_fail: Sequence[str | Control] = (),
        must_pass: Sequence[str | Control] = (),
        config: GenerationConfig | None = None,
        name: str | None = None,
        repeats: int = 1,
    ) -> None:
        if not isinstance(rubric, str) or not rubric.strip():
            raise ValueError("judge: rubric: must be a non-empty string")
        if pass_at is not None and not 0.0 <= pass_at <= 1.0:
            raise ValueError(f"judge: pass_at must be within [0, 1], got {pass_at}")
        if protocol not in get_args(ProtocolChoice):
            raise ValueError(f"judge: protocol: must be auto, json, tool or text, got {protocol!r}")
        unknown = [part for part in include if part not in get_args(Include)]
        if unknown:
            known = ", ".join(get_args(Include))
            raise ValueError(f"judge: include: unknown part {unknown[0]!r} (known: {known})")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"judge: repeats must be a whole number >= 1, got {repeats!r}")
        if isinstance(model, str):
            check_model_id(model)
        self.repeats = repeats
        self.rubric = rubric
        self.scale: Scale = "pass_fail" if pass_at is None else "score"
        self.pass_at = 1.0 if pass_at is None else pass_at
        self.model = model
        self.protocol = protocol
        self.include = tuple(include)
        self.must_fail = [_control(c, "must_fail") for c in must_fail]
        self.must_pass = [_control(c, "must_pass") for c in must_pass]
        config = config or GenerationConfig()
        if config.temperature is None:
            config = config.model_copy(update={"temperature": 0.0})
        self.config = config
        self._name = name
        self._given = get_model(model) if isinstance(model, Model) else None
        self._leases = _Leases()
        self._runs: list[_ControlRun] = []
        self._runs_lock = threading.Lock()

    @property
    def name(self) -> str:
        if self._name:
            return self._name
        shown = self.rubric if len(self.rubric) <= 40 else self.rubric[:39] + "…"
        by = "" if self.model is None else f", model={_model_id(self.model)!r}"
        return f"judge({shown!r}{by})"

    def __repr__(self) -> str:
        return self.name

    async def grade(self, ctx: GradeContext) -> Score:
        chosen = self.model if self.model is not None else current_settings().judge_model
        if chosen is None:
            return _error("JudgeSetupError", f"{self.name}: {NO_MODEL}", {})
        async with self._lease(chosen) as model:
            protocol = self._protocol_for(model)
            metadata: dict[str, Any] = {
                "judge_model": model.id,
                "protocol": protocol,
                "scale": self.scale,
                "temperature": self.config.temperature,
            }
            if self.must_fail or self.must_pass:
                controls = await self._controls(model, protocol)
                metadata["controls"] = controls.summary()
                problem = controls.problem()
                if problem is not None:
                    return _error(problem.type, problem.message, metadata)
            material = self._material(ctx)
            if self.repeats == 1:
                return await self._ask(model, protocol, material, metadata)
            # One after another: a cassette keeps each answer as the next occurrence.
            answers = [
                await self._ask(model, protocol, material, metadata) for _ in range(self.repeats)
            ]
            return combine_answers(answers, pass_at=self.pass_at, rubric=self.rubric)

    async def _ask(
        self, model: ManagedModel, protocol: Protocol, material: Material, metadata: dict[str, Any]
    ) -> Score:
        request = build_request(
            self.rubric, material, scale=self.scale, protocol=protocol, config=self.config
        )
        try:
            response = await model.generate(request)
        except Exception as exc:
            score = Score.from_error(ErrorInfo.from_exception(exc, phase="grading"))
            score.metadata = metadata
            return score
        metadata = {**metadata, "judge_served_by": response.model}
        try:
            grade = parse_answer(response, protocol=protocol, scale=self.scale)
        except JudgeAnswerError as exc:
            said = response.text or str([c.arguments for c in response.tool_calls])
            return _error("JudgeAnswerError", str(exc), {**metadata, "judge_answer": said[:2000]})
        if grade.value is None:
            why = grade.reasoning or "the judge cannot tell"
            return Score(verdict=Verdict.UNKNOWN, rationale=why, metadata=metadata)
        score = Score.from_value(grade.value, pass_at=self.pass_at, rationale=grade.reasoning)
        score.metadata = metadata
        return score

    def _protocol_for(self, model: Model) -> Protocol:
        if self.protocol != "auto":
            return self.protocol
        if model.supports_structured_output:
            return "json"
        return "tool" if model.provider in _TOOL_CHOICE_PROVIDERS else "text"

    @asynccontextmanager
    async def _lease(self, chosen: str | Model) -> AsyncIterator[ManagedModel]:
        if self._given is not None:
            yield self._given
            return
        async with self._leases.lease(_model_id(chosen)) as model:
            yield model

    def _material(self, ctx: GradeContext) -> Material:
        task, shown = ctx.task, set(self.include)
        diff = ctx.outcome.diff if "diff" in shown else None
        return Material(
            output=ctx.output,
            input=render_input(task.turns) if "input" in shown else None,
            criteria=task.criteria if "criteria" in shown else None,
            reference=task.reference if "reference" in shown else None,
            tool_calls=calls_text(ctx.transcript) if "tool_calls" in shown else None,
            diff=None if diff is None else diff_text(diff),
        )

    # --- negative controls -------------------------------------------------------------

    async def _controls(self, model: ManagedModel, protocol: Protocol) -> _ControlReport:
        """The controls' results for this run and model, graded by the first trial that asks."""
        settings = current_settings()
        with self._runs_lock:
            run = next((r for r in self._runs if r.matches(settings, model.id)), None)
            if run is None:
                run = _ControlRun(settings, model.id)
                self._runs = [*self._runs[-7:], run]
        if run.report is not None:
            return run.report
        async with run.lock:
            if run.report is None:
                run.report = await self._grade_controls(model, protocol)
        return run.report

    async def _grade_controls(self, model: ManagedModel, protocol: Protocol) -> _ControlReport:
        cases: list[tuple[Literal["pass", "fail"], int, Control]] = [
            *(("fail", i, c) for i, c in enumerate(self.must_fail)),
            *(("pass", i, c) for i, c in enumerate(self.must_pass)),
        ]
        scores: list[Score | None] = [None] * len(cases)
        metadata = {"judge_model": model.id}

        async def one(k: int, control: Control) -> None:
            scores[k] = await self._ask(model, protocol, control.material(), metadata)

        # Controls belong to no trial: a recorder of their own gives their calls the same
        # cassette slots (trial 0, first occurrence) whichever trial happened to trigger them,
        # and hands the calls to the run, which counts their tokens and cost.
        recorder = TranscriptRecorder(CONTROLS, 0)
        settings = current_settings()
        token = activate(recorder)
        try:
            async with anyio.create_task_group() as tg:
                for k, (_, _, control) in enumerate(cases):
                    tg.start_soon(one, k, control)
        finally:
            deactivate(token)
            settings.run_calls.extend(recorder.transcript.model_calls)
        return _ControlReport(
            [
                _ControlResult(expect, i, control, score)
                for (expect, i, control), score in zip(cases, scores, strict=True)
                if score is not None
            ]
        )


def _control(value: str | Control, field: str) -> Control:
    if isinstance(value, Control):
        return value
    if isinstance(value, str):
        return Control(output=value)
    raise TypeError(f"judge: {field}: expected outputs (strings) or Controls, got {value!r}")


class _ControlRun:
    """The controls of one judge for one run (its `ModelSettings`) and one model."""

    def __init__(self, settings: ModelSettings, model_id: str) -> None:
        self.settings = settings
        self.model_id = model_id
        self.lock = anyio.Lock()
        self.report: _ControlReport | None = None

    def matches(self, settings: ModelSettings, model_id: str) -> bool:
        return self.settings is settings and self.model_id == model_id


@dataclass(frozen=True)
class _ControlResult:
    expect: Literal["pass", "fail"]
    index: int
    control: Control
    score: Score

    @property
    def label(self) -> str:
        shown = self.control.output
        shown = shown if len(shown) <= 60 else shown[:59] + "…"
        return f"must_{self.expect}[{self.index}] ({shown!r})"


@dataclass(frozen=True)
class _ControlReport:
    results: list[_ControlResult]

    def problem(self) -> ErrorInfo | None:
        """Why the judge's scores cannot count: a control it got wrong, or one it could not
        grade; `None` when every control got its verdict."""
        for r in self.results:
            if r.score.verdict.value != r.expect and r.score.verdict is not Verdict.ERROR:
                return ErrorInfo(
                    type="BrokenJudge",
                    message=f"the judge is broken: it gave {r.score.verdict.value} to the "
                    f"control {r.label}, which must {r.expect}; no score of it counts",
                    phase="grading",
                )
        for r in self.results:
            if r.score.verdict is Verdict.ERROR:
                return ErrorInfo(
                    type="JudgeControlError",
                    message=f"the control {r.label} could not be graded, so the judge is "
                    f"unchecked: {r.score.rationale}",
                    phase="grading",
                )
        return None

    def summary(self) -> dict[str, Any]:
        return {
            "ok": self.problem() is None,
            "results": [
                {
                    "control": r.label,
                    "expect": r.expect,
                    "verdict": r.score.verdict.value,
                    "value": r.score.value,
                }
                for r in self.results
            ],
        }


class _Leases:
    """Models a judge opened from their ids, shared by the gradings in flight and closed when
    the last of them ends (a grader has no end-of-run hook to close them at)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[ManagedModel, int]] = {}

    @asynccontextmanager
    async def lease(self, model_id: str) -> AsyncIterator[ManagedModel]:
        with self._lock:
            model, users = self._open.get(model_id) or (get_model(model_id), 0)
            self._open[model_id] = (model, users + 1)
        try:
            yield model
        finally:
            with self._lock:
                users = self._open[model_id][1] - 1
                if users:
                    self._open[model_id] = (model, users)
                else:
                    del self._open[model_id]
            if not users:
                with anyio.CancelScope(shield=True):
                    await model.aclose()


def _model_id(model: str | Model) -> str:
    return model if isinstance(model, str) else model.id


def _error(kind: str, message: str, metadata: dict[str, Any]) -> Score:
    score = Score.from_error(ErrorInfo(type=kind, message=message, phase="grading"))
    score.metadata = metadata
    return score


# --- several judges ------------------------------------------------------------------------


class _Vote(_Composite):
    """Grades every part; `quorum` parts must decide (pass or fail) for the vote to count."""

    label = ""

    def __init__(self, graders: Sequence[GraderLike], quorum: int | None, name: str | None) -> None:
        self.parts = self._init_parts(graders, self.label)
        if quorum is not None and not 1 <= quorum <= len(self.parts):
            raise ValueError(
                f"{self.label}: quorum must be between 1 and {len(self.parts)}, got {quorum}"
            )
        self.quorum = len(self.parts) if quorum is None else quorum
        self._name = name

    @property
    def name(self) -> str:
        return self._name or f"{self.label}({', '.join(p.name for p in self.parts)})"

    async def grade(self, ctx: GradeContext) -> Score:
        scores = await _grade_all(self.parts, ctx)
        decided = [s for s in scores if _decided(s)]
        if len(decided) < self.quorum:
            missing = [f"{s.name} is {s.verdict.value}" for s in scores if not _decided(s)]
            message = (
                f"{len(decided)} of {len(scores)} parts decided, under the quorum of "
                f"{self.quorum}: {', '.join(missing)}"
            )
            if any(s.verdict is Verdict.ERROR for s in scores):
                score = _error("NoQuorum", message, {})
            else:
                score = Score(verdict=Verdict.UNKNOWN, rationale=message)
        else:
            score = self.decide(decided)
        score.assertions = [s.as_assertion() for s in scores]
        judges = [s.name for p, s in zip(self.parts, scores, strict=True) if _is_judge(p, s)]
        score.metadata = {**score.metadata, JUDGES_KEY: judges}
        return score

    def decide(self, decided: list[Score]) -> Score:
        raise NotImplementedError


def _is_judge(part: Grader, score: Score) -> bool:
    """A judge, or a grader whose score says a judge model gave it (what `judge` records)."""
    return isinstance(part, judge) or "judge_model" in score.metadata


def _decided(score: Score) -> bool:
    return score.verdict in (Verdict.PASS, Verdict.FAIL)


class majority(_Vote):
    """Passes when more than half of the parts that decided passed (a tie fails).

    Every part must decide unless `quorum` says how many must: below it the score is an error
    when a part errored, otherwise unknown. Parts that said unknown or errored do not vote.
    The value is the share of votes that passed.
    """

    label = "majority"

    def __init__(
        self, *graders: GraderLike, quorum: int | None = None, name: str | None = None
    ) -> None:
        super().__init__(graders, quorum, name)

    def decide(self, decided: list[Score]) -> Score:
        passed = sum(s.passed for s in decided)
        ok = passed * 2 > len(decided)
        return Score(
            value=passed / len(decided),
            verdict=Verdict.PASS if ok else Verdict.FAIL,
            rationale=f"{passed} of {len(decided)} passed",
        )


class mean(_Vote):
    """The mean of the parts' values, passing at `pass_at` (a pass counts 1, a fail 0).

    Every part must decide unless `quorum` says how many must: below it the score is an error
    when a part errored, otherwise unknown; the mean is over the parts that decided.
    """

    label = "mean"

    def __init__(
        self,
        *graders: GraderLike,
        pass_at: float,
        quorum: int | None = None,
        name: str | None = None,
    ) -> None:
        if not 0.0 <= pass_at <= 1.0:
            raise ValueError(f"mean: pass_at must be within [0, 1], got {pass_at}")
        super().__init__(graders, quorum, name)
        self.pass_at = pass_at

    def decide(self, decided: list[Score]) -> Score:
        values = [s.value if s.value is not None else float(s.passed) for s in decided]
        value = sum(values) / len(values)
        score = Score.from_value(value, pass_at=self.pass_at)
        score.rationale = f"mean {value:.3f} of {len(values)} parts (passes at {self.pass_at})"
        return score
