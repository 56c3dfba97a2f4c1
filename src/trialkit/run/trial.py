"""One trial, start to end: setup, the agent's turns, capture, grading (DESIGN §2 steps 1-5).

Everything that goes wrong inside becomes data on the `Trial`; the runner only schedules.
"""

from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pydantic_core

from trialkit._calls import call_user
from trialkit._errors import describe, find
from trialkit._record import ErrorInfo, clean_text
from trialkit.capture.calls import flush_held
from trialkit.capture.faults import ModelFault
from trialkit.capture.scope import OfflineRefused, collect_children, trial_ended, trial_started
from trialkit.environments.base import Environment
from trialkit.graders.base import GradeContext, Grader, run_grader, trial_verdict
from trialkit.harness.base import Harness, HarnessError, Reply, Session, TrialContext
from trialkit.harness.chat import ChatHarness
from trialkit.models.base import Model, ModelError
from trialkit.models.cassette import CassetteMiss
from trialkit.models.context import calls_as
from trialkit.models.pricing import add_costs
from trialkit.outcome import Outcome
from trialkit.run.sandboxes import RunSandbox
from trialkit.sandbox.base import LimitExceeded, Phase, SandboxError
from trialkit.sandbox.trial import TrialSandbox
from trialkit.score import Score, Verdict
from trialkit.task import Suite, Task
from trialkit.transcript import (
    Message,
    ModelCall,
    Transcript,
    TranscriptRecorder,
    Turn,
    activate,
    deactivate,
)
from trialkit.trial import SandboxRecord, Trial, TrialStatus


@dataclass
class PlannedTask:
    task: Task
    graders: list[Grader]
    trials: int
    timeout: float


class TrialRunner:
    """Runs one trial through setup, the agent's turns, capture and grading."""

    def __init__(
        self,
        run_id: str,
        suite: Suite,
        harness: Harness,
        env: Environment,
        model_for: Callable[[Task], str | Model | None],
    ) -> None:
        self.run_id = run_id
        self.suite = suite
        self.harness = harness
        self.env = env
        self.model_for = model_for
        self.sandboxes = RunSandbox(harness, suite)

    async def aclose(self) -> None:
        """Undo what the run's sandbox provider set up once (after the last trial)."""
        await self.sandboxes.aclose()

    async def run(self, item: PlannedTask, index: int) -> Trial:
        task = item.task
        recorder = TranscriptRecorder(task.id, index)
        token = activate(recorder)
        trial_started(recorder)
        started_at = recorder.transcript.timing.started_at or datetime.now(UTC)
        clock = time.perf_counter()
        state = _TrialState()
        try:
            with anyio.move_on_after(item.timeout) as scope:
                await self._steps(item, index, recorder, state)
            if scope.cancelled_caught:
                state.status = TrialStatus.TIMEOUT
                state.error = ErrorInfo(
                    type="Timeout",
                    message=f"the trial exceeded its {item.timeout:g} s timeout",
                    phase=state.phase,
                )
        finally:
            flush_held(recorder)
            trial_ended(recorder)
            recorder.closed = True
            await self._close_sandbox(state)
            if state.world_ready:
                self.env.keep_for(state.world, self._verdict(state), run_id=self.run_id)
                await self._teardown(state)
            deactivate(token)
        transcript = recorder.transcript
        transcript.timing.total_s = time.perf_counter() - clock
        verdict = self._verdict(state)
        return Trial(
            run_id=self.run_id,
            task_id=task.id,
            index=index,
            status=state.status,
            verdict=verdict,
            expect=task.expect,
            transcript=transcript,
            outcome=state.outcome,
            scores=state.scores,
            error=state.error,
            usage=transcript.usage,
            grader_usage=transcript.grader_usage,
            cost_usd=_cost(transcript),
            grader_cost_usd=_grader_cost(transcript.model_calls),
            sandbox=state.sandbox_record,
            model=model_name(self.model_for(task))
            if isinstance(self.harness, ChatHarness)
            else None,
            started_at=started_at,
            duration_s=transcript.timing.total_s,
        )

    async def _steps(
        self, item: PlannedTask, index: int, recorder: TranscriptRecorder, state: _TrialState
    ) -> None:
        task = item.task
        timing = recorder.transcript.timing
        mark = time.perf_counter()
        state.phase = "setup"
        try:
            state.world = await self.env.setup(task, index)
            state.world_ready = True
        except Exception as exc:
            state.fail_with(exc, "setup")
            return
        timing.setup_s = time.perf_counter() - mark
        recorder.substitutions = per_trial_values(state.world)

        try:
            state.sandbox, state.sandbox_folder = await self.sandboxes.for_trial(state.world)
        except Exception as exc:  # the provider's setup (an image build) failed
            state.fail_with(exc, "setup")
            return

        mark = time.perf_counter()
        state.phase = "agent"
        ctx = TrialContext(
            task=task,
            trial_index=index,
            world=state.world,
            run_id=self.run_id,
            model=self.model_for(task),
            config=self.suite.config,
            system=self.suite.system,
            sandbox=state.sandbox,
        )
        agent_error = await self._converse(ctx, recorder, state.outcome)
        timing.agent_s = time.perf_counter() - mark
        collect_children()  # what a child the agent forked refused
        flush_held(recorder)  # calls that failed and were never retried are faults now
        if recorder.fatal is not None:  # a replay miss, an --offline refusal
            state.fail_with(recorder.fatal, "agent")
            return
        if recorder.faults and task.model_faults != "allow":  # a call got no usable answer
            state.fail_with(recorder.faults[0], "agent")
            return
        if (hit := _limit_hit(state.sandbox, "agent")) is not None:  # even when swallowed
            state.fail_with(hit, "agent")
            return
        if agent_error is not None:
            if task.expect == "failure" and not_the_agents(agent_error) is None:
                kind, message = describe(agent_error)
                state.outcome.failed = True
                state.outcome.failure = f"{kind}: {message}"
            else:
                state.fail_with(agent_error, "agent")
                return

        mark = time.perf_counter()
        state.phase = "capture"
        try:
            await self.env.capture(state.world, state.outcome)
        except Exception as exc:
            state.fail_with(exc, "capture")
            return
        timing.capture_s = time.perf_counter() - mark

        mark = time.perf_counter()
        state.phase = "grading"
        grade_ctx = GradeContext(
            task=task,
            trial_index=index,
            transcript=recorder.transcript,
            outcome=state.outcome,
            world=state.world,
            sandbox=state.sandbox,
        )
        if state.sandbox is not None:
            await state.sandbox.set_phase("grader")
        with calls_as("grader"):
            state.scores = await _grade(item.graders, grade_ctx, expect=task.expect)
        timing.grading_s = time.perf_counter() - mark
        collect_children()
        if (hit := _limit_hit(state.sandbox, "grader")) is not None:
            state.fail_with(hit, "grading")
            return
        for score in state.scores:  # a grader that raised a limit, of whichever sandbox
            if score.error is not None and score.error.type == LimitExceeded.__name__:
                state.status = TrialStatus.ERROR
                message = f"grader {score.name!r}: {score.error.message}"
                state.error = score.error.model_copy(update={"message": message})
                return
        if recorder.fatal is not None:  # a grader's own SDK call could not be answered
            state.fail_with(recorder.fatal, "grading")
            return
        state.phase = "done"

    async def _converse(
        self, ctx: TrialContext, recorder: TranscriptRecorder, outcome: Outcome
    ) -> Exception | None:
        """Send each user turn; returns the exception the agent raised, if it raised."""
        session = None
        try:
            session = await self.harness.session(ctx)
            probes = self.suite.probes_for(ctx.task)
            for number, turn in enumerate(ctx.task.turns):
                recorder.turn = number
                start = recorder.elapsed()
                if isinstance(turn, str):
                    recorder.add_message(Message(role="user", content=turn))
                else:
                    for message in turn:
                        recorder.add_message(message)
                reply = await session.send(turn)
                _record_reply(recorder, reply, number, turn, start)
                if probes:
                    await _probe(recorder.transcript.turns[-1], probes, ctx.world)
                outcome.output = reply.output
                outcome.state.update(reply.state)
                if reply.is_error:
                    outcome.failed = True
                    outcome.failure = reply.error or reply.output or "the agent reported failure"
                    break
        except Exception as exc:
            return exc
        finally:
            # The base class's `close` does nothing: no shielded scope for it on every trial.
            if session is not None and type(session).close is not Session.close:
                with anyio.CancelScope(shield=True):
                    try:
                        await session.close()
                    except Exception as exc:  # a failing close must not hide the trial's result
                        kind, why = describe(exc)
                        recorder.transcript.messages.append(
                            Message(role="system", content=f"session.close() raised {kind}: {why}")
                        )
        return None

    async def _close_sandbox(self, state: _TrialState) -> None:
        """Stop the trial's sandbox and keep what the trial records of it: a sandbox the run
        named always; the `local` default only when something ran in it."""
        sandbox = state.sandbox
        if sandbox is None:
            return
        recorded = self.sandboxes.named is not None or sandbox.used  # else the unused default
        info = sandbox.info if recorded else None  # the provider's own, while it is open
        try:
            await self.sandboxes.close_trial(sandbox, state.sandbox_folder)
        except Exception as exc:
            if state.error is None:
                state.fail_with(exc, "teardown")
        if info is None:
            return
        hits = [limit for _, limit in sandbox.hits]
        state.sandbox_record = SandboxRecord(
            provider=info.provider,
            isolated=info.isolated,
            network=info.network,
            grader_network=info.grader_network,
            limits=dict(info.limits),
            image=info.image,
            details=dict(info.details),
            limit_hit=hits[0] if hits else None,
        )

    async def _teardown(self, state: _TrialState) -> None:
        if type(self.env).teardown is Environment.teardown:
            return  # the base's does nothing: not worth a shielded scope on every trial
        with anyio.CancelScope(shield=True):
            try:
                await self.env.teardown(state.world)
            except Exception as exc:
                if state.error is None:
                    state.status = TrialStatus.ERROR
                    state.error = ErrorInfo.from_exception(exc, phase="teardown")

    @staticmethod
    def _verdict(state: _TrialState) -> Verdict:
        return trial_verdict(state.status, state.scores)


class _TrialState:
    __slots__ = (
        "error",
        "outcome",
        "phase",
        "sandbox",
        "sandbox_folder",
        "sandbox_record",
        "scores",
        "status",
        "world",
        "world_ready",
    )

    def __init__(self) -> None:
        self.status = TrialStatus.COMPLETED
        self.error: ErrorInfo | None = None
        self.outcome = Outcome()
        self.scores: list[Score] = []
        self.world: Any = None
        self.world_ready = False
        self.phase = "setup"
        self.sandbox: TrialSandbox | None = None
        self.sandbox_folder: Path | None = None
        self.sandbox_record: SandboxRecord | None = None

    def fail_with(self, exc: BaseException, phase: str) -> None:
        self.status = TrialStatus.ERROR
        traceback = ErrorInfo.from_exception(exc, phase=phase).traceback
        kind, message = describe(exc, first=_NOT_THE_AGENTS)  # what broke leads the message
        self.error = ErrorInfo(
            type=kind, message=clean_text(message), traceback=traceback, phase=phase
        )


def _record_reply(
    recorder: TranscriptRecorder,
    reply: Reply,
    number: int,
    turn: str | list[Message],
    start: float,
) -> None:
    for message in reply.messages:
        recorder.add_message(message)
    last = reply.messages[-1] if reply.messages else None
    if reply.output is not None and not (
        last is not None and last.role == "assistant" and last.content == reply.output
    ):
        recorder.add_message(Message(role="assistant", content=reply.output))
    for call in reply.tool_calls:
        recorder.add_tool_call(call)
    for thought in reply.reasoning:
        recorder.add_reasoning(thought)
    if reply.usage is not None:
        recorder.add_usage(reply.usage)
    recorder.transcript.turns.append(
        Turn(
            index=number,
            input=turn,
            output=reply.output,
            is_error=reply.is_error,
            started_at=start,
            duration_s=recorder.elapsed() - start,
            cost_usd=reply.cost_usd,
            reported_usage=reply.reported_usage,
            reported_cost_usd=reply.reported_cost_usd,
        )
    )


async def _probe(turn: Turn, probes: dict[str, Callable[[Any], Any]], world: Any) -> None:
    """Ask each probe about the world as it is after `turn`; answers and errors go on it."""
    for name, query in probes.items():
        try:
            value = await call_user(query, world)
            turn.probes[name] = json.loads(
                pydantic_core.to_json(value, fallback=repr, inf_nan_mode="null")
            )
        except Exception as exc:
            kind, message = describe(exc)
            turn.probe_errors[name] = f"{kind}: {message}"


_COMPLETED = "agent_completed"
_NOT_THE_AGENTS = (
    TimeoutError,
    HarnessError,
    CassetteMiss,
    ModelError,
    OfflineRefused,
    ModelFault,
    SandboxError,
)
"""Errors that are never an agent's expected failure: time ran out, the harness broke, a
replay found no recording, or a model could not be called or gave no usable answer (a
provider's outage, a bad key or model id: no answer came, so nothing was refused), or the
sandbox failed or a limit of it was hit (`LimitExceeded`)."""


def _limit_hit(sandbox: TrialSandbox | None, phase: Phase) -> SandboxError | None:
    return sandbox.hit(phase) if sandbox is not None else None


def not_the_agents(exc: BaseException) -> BaseException | None:
    """The exception in `exc` (itself, or any leaf of its exception groups) that makes it an
    error rather than the agent's own failure; `None` when the agent just failed."""
    return find(exc, _NOT_THE_AGENTS)


async def _grade(graders: list[Grader], ctx: GradeContext, *, expect: str) -> list[Score]:
    """Run the graders (inline when quick, concurrently otherwise), in their listed order.

    For a task expected to succeed, an agent that reported failure gets a failing
    `agent_completed` check, and a task with no graders gets a passing one, so a verdict
    always says what it rests on.
    """
    implicit: list[Score] = []
    if expect == "success" and ctx.outcome.failed:
        implicit.append(
            Score.from_bool(
                False,
                name=_COMPLETED,
                rationale=f"the agent reported failure: {ctx.outcome.failure}",
            )
        )
    elif expect == "success" and not graders:
        implicit.append(Score.from_bool(True, name=_COMPLETED))
    scores: list[Score | None] = [None] * len(graders)
    deferred: list[int] = []
    for i, g in enumerate(graders):
        if g.blocking or _is_async_grader(g):
            deferred.append(i)
        else:
            scores[i] = await run_grader(g, ctx)
    if deferred:

        async def one(i: int) -> None:
            scores[i] = await run_grader(graders[i], ctx)

        async with anyio.create_task_group() as tg:
            for i in deferred:
                tg.start_soon(one, i)
    return implicit + [s for s in scores if s is not None]


def _is_async_grader(g: Grader) -> bool:
    return inspect.iscoroutinefunction(g.grade) or getattr(g, "is_async", False) is True


def _cost(transcript: Transcript) -> float | None:
    """What the trial cost: its model calls, plus what the agent reported its own calls cost
    (a turn that reported nothing adds nothing); `None` when there was neither (unknown, not
    free) or a call's price is unknown."""
    calls = [call.cost_usd for call in transcript.model_calls]
    reported = [turn.cost_usd for turn in transcript.turns if turn.cost_usd is not None]
    return add_costs(*calls, *reported) if calls or reported else None


def _grader_cost(calls: Sequence[ModelCall]) -> float | None:
    """Graders that called no model cost nothing; otherwise the sum, `None` if any is unknown."""
    graded = [c.cost_usd for c in calls if c.role == "grader"]
    return add_costs(*graded) if graded else 0.0


def model_name(model: str | Model | None) -> str | None:
    return model.id if isinstance(model, Model) else model


WORKSPACE_PLACEHOLDER = "{{trialkit.workspace}}"


def per_trial_values(world: object) -> list[tuple[str, str]]:
    """The values of this trial that a replay in another trial or run sees differently (its
    workspace folder), with the placeholder cassettes write in their place."""
    path = getattr(world, "path", None)
    if path is None:
        return []
    real = os.path.realpath(path)
    values = {str(path), real}
    return [(value, WORKSPACE_PLACEHOLDER) for value in sorted(values, key=len, reverse=True)]
