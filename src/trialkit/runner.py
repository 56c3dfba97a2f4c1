"""The runner: plans trials, runs them with bounded concurrency, grades, stores and reports.

See DESIGN §2 for the flow of one trial. Every exception inside a trial becomes data on the
trial; nothing a trial does cancels the run.
"""

from __future__ import annotations

import inspect
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from trialkit._record import ErrorInfo
from trialkit._writer import TrialWriter
from trialkit.environments.base import NO_ENVIRONMENT, Environment
from trialkit.graders.base import GradeContext, Grader, as_grader, combine_verdicts, run_grader
from trialkit.graders.text import agent_failed
from trialkit.harness.base import Harness, Reply, TrialContext
from trialkit.harness.chat import ChatHarness
from trialkit.harness.function import as_harness
from trialkit.models.base import Model
from trialkit.models.context import ModelSettings, calls_as, use_settings
from trialkit.models.registry import UnknownModel, preflight
from trialkit.models.retry import RetryPolicy
from trialkit.outcome import Outcome
from trialkit.report import (
    Report,
    RunInfo,
    SuiteInfo,
    TaskPlan,
    TrialResult,
    build_report,
)
from trialkit.score import Score, Verdict
from trialkit.task import Suite, SuiteError, Task
from trialkit.transcript import Message, TranscriptRecorder, Turn, activate, deactivate
from trialkit.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from trialkit.models.cassette import Cassette
    from trialkit.progress import Progress
    from trialkit.store import Store

DEFAULT_CONCURRENCY = 10


class EmptySelection(SuiteError):
    """The task selection is empty: nothing would run (exit 2, never a green run)."""


@dataclass
class _PlannedTask:
    task: Task
    graders: list[Grader]
    trials: int
    timeout: float


def new_run_id() -> str:
    """A run id that sorts by start time and is unique: `20261129T231500-1a2b3c`."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


class Runner:
    """Runs suites. Options given here override the suite's (like the CLI flags do).

    `store` is a `Store` or a store URL / SQLite path; without one nothing is kept.
    """

    def __init__(
        self,
        *,
        store: Store | str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        trials: int | None = None,
        timeout: float | None = None,
        task_ids: Sequence[str] = (),
        tags: Sequence[str] = (),
        name: str | None = None,
        harness: Any = None,
        progress: Progress | None = None,
        model: str | None = None,
        judge_model: str | None = None,
        cassette: Cassette | None = None,
        retry: RetryPolicy | None = None,
        max_cost: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if trials is not None and trials < 1:
            raise ValueError(f"trials must be >= 1, got {trials}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_cost is not None and not max_cost > 0:
            raise ValueError(f"max_cost must be > 0 dollars, got {max_cost}")
        if isinstance(store, str):
            from trialkit.store import Store, resolve_store_url

            store = Store(resolve_store_url(store))
        self.store = store
        self.concurrency = concurrency
        self.trials = trials
        self.timeout = timeout
        self.task_ids = tuple(task_ids)
        self.tags = tuple(tags)
        self.name = name
        self.harness_override = harness
        self.progress = progress
        self.model = model
        self.settings = ModelSettings(
            cassette=cassette,
            retry=retry or RetryPolicy(),
            default_model=model,
            judge_model=judge_model,
        )
        self.max_cost = max_cost
        self.last_run: RunInfo | None = None
        """The run being (or last) run, so a caller can name it after an interruption."""
        self.finished = 0
        """Trials of the current run that finished (and are stored, when there is a store)."""

    def plan(self, suite: Suite) -> list[_PlannedTask]:
        """The tasks to run with their graders, trial counts and timeouts."""
        tasks = suite.select(task_ids=self.task_ids, tags=self.tags)
        if not tasks:
            wanted = [*(f"--task {t}" for t in self.task_ids), *(f"--tag {t}" for t in self.tags)]
            detail = f" matching {' '.join(wanted)}" if wanted else ""
            raise EmptySelection(f"suite {suite.id!r}: no tasks{detail}; nothing to run")
        suite_graders = [as_grader(g) for g in suite.graders]
        planned = []
        for task in tasks:
            own = [as_grader(g) for g in task.graders]
            if task.expect == "failure" and not own:
                own = [agent_failed()]  # suite-wide checks alone never prove a refusal
            graders = [*suite_graders, *own]
            planned.append(
                _PlannedTask(
                    task=task,
                    graders=graders,
                    trials=suite.trials_for(task, self.trials),
                    timeout=suite.timeout_for(task, self.timeout),
                )
            )
        return planned

    def _harness(self, suite: Suite, planned: list[_PlannedTask]) -> Harness:
        chosen = self.harness_override if self.harness_override is not None else suite.harness
        if chosen is None:
            has_model = suite.model is not None or self.model is not None
            if not (has_model or all(p.task.model is not None for p in planned)):
                raise SuiteError(
                    f"suite {suite.id!r}: nothing to evaluate: give the agent under test as "
                    "Suite(harness=your_function), or a model with Suite(model=...), "
                    "--model or TRIALKIT_MODEL"
                )
            chosen = ChatHarness()
        try:
            harness = as_harness(chosen)
        except TypeError as exc:
            raise SuiteError(f"suite {suite.id!r}: harness: {exc}") from None
        models = {self._model_for(harness, suite, p.task) for p in planned}
        models |= {p.task.model for p in planned if isinstance(p.task.model, str)}
        for model in models:
            if isinstance(model, str):
                try:
                    preflight(model, replaying=self._replaying())
                except UnknownModel as exc:
                    raise SuiteError(f"suite {suite.id!r}: {exc}") from None
        return harness

    def _model_for(self, harness: Harness, suite: Suite, task: Task | None) -> str | Model | None:
        """The model that answers `task`: a chat harness's own, else task → suite → option."""
        if isinstance(harness, ChatHarness) and harness.model is not None:
            return harness.model
        own = task.model if task is not None else None
        return own or suite.model or self.model

    def _replaying(self) -> bool:
        cassette = self.settings.cassette
        return cassette is not None and cassette.mode == "replay"

    async def run(self, suite: Suite) -> Report:
        """Run every selected task's trials and return the report.

        Each trial is stored as soon as it is graded. If the run is cancelled (Ctrl-C), the
        trials that finished are stored, the run is marked `interrupted`, and the cancellation
        propagates.
        """
        planned = self.plan(suite)
        harness = self._harness(suite, planned)
        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = max(threads.total_tokens, self.concurrency)
        environment = suite.environment or NO_ENVIRONMENT
        run = RunInfo(
            id=new_run_id(),
            name=self.name,
            started_at=datetime.now(UTC),
            status="running",
            config={
                "concurrency": self.concurrency,
                "trials": self.trials,
                "timeout": self.timeout,
                "task_ids": list(self.task_ids),
                "tags": list(self.tags),
                "harness": getattr(harness, "name", type(harness).__name__),
                "model": _model_name(self._model_for(harness, suite, None))
                if isinstance(harness, ChatHarness)
                else None,
                "judge_model": self.settings.judge_model,
                "max_cost": self.max_cost,
            },
        )
        self.last_run = run
        self.finished = 0
        suite_info = SuiteInfo(id=suite.id, kind=suite.kind, description=suite.description)
        plans = [
            TaskPlan(
                id=p.task.id, kind=suite.task_kind(p.task), expect=p.task.expect, tags=p.task.tags
            )
            for p in planned
        ]
        if self.store is not None:
            await anyio.to_thread.run_sync(self.store.create_run, run, suite_info, plans)
        results: dict[str, list[TrialResult]] = {p.task.id: [] for p in planned}
        writer = TrialWriter(self.store)
        total = sum(p.trials for p in planned)
        if self.progress is not None:
            self.progress.start(total)
        trial_runner = _TrialRunner(
            run.id, suite, harness, environment, lambda task: self._model_for(harness, suite, task)
        )
        budget = _Budget(self.max_cost)

        async def worker(queue: Iterator[tuple[_PlannedTask, int]]) -> None:
            for item, index in queue:
                if budget.spent_out():
                    return
                trial = await trial_runner.run(item, index)
                budget.add(trial)
                results[item.task.id].append(TrialResult.from_trial(trial))
                await writer.put(trial)
                self.finished += 1
                if self.progress is not None:
                    self.progress.advance(trial)

        queue = iter([(p, i) for p in planned for i in range(p.trials)])
        try:
            with use_settings(self.settings):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(writer.loop)
                    async with anyio.create_task_group() as workers:
                        for _ in range(min(self.concurrency, total)):
                            workers.start_soon(worker, queue)
                    writer.close()
            run.status = "completed"
            if budget.spent_out() and self.finished < total:
                run.status = "stopped"
                run.config["stop_reason"] = (
                    f"the cost budget of ${self.max_cost:g} was spent (${budget.spent:.4f}) "
                    f"after {self.finished} of {total} trials"
                )
        except BaseException:
            run.status = "interrupted"
            raise
        finally:
            run.finished_at = datetime.now(UTC)
            writer.flush_now()
            if self.store is not None:
                self.store.finish_run(run)
            if self.progress is not None:
                self.progress.stop()
            with anyio.CancelScope(shield=True):
                await harness.aclose()
            if self.settings.cassette is not None:
                self.settings.cassette.write_manifest()
        return build_report(run, suite_info, plans, results)


class _TrialRunner:
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

    async def run(self, item: _PlannedTask, index: int) -> Trial:
        task = item.task
        recorder = TranscriptRecorder(task.id, index)
        token = activate(recorder)
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
                    message=f"the trial exceeded its {item.timeout:g} s timeout "
                    f"(during {state.phase})",
                    phase=state.phase,
                )
        finally:
            if state.world_ready:
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
            cost_usd=_cost(transcript.model_calls),
            grader_cost_usd=_grader_cost(transcript.model_calls),
            model=_model_name(self.model_for(task))
            if isinstance(self.harness, ChatHarness)
            else None,
            started_at=started_at,
            duration_s=transcript.timing.total_s,
        )

    async def _steps(
        self, item: _PlannedTask, index: int, recorder: TranscriptRecorder, state: _TrialState
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
        )
        agent_error = await self._converse(ctx, recorder, state.outcome)
        timing.agent_s = time.perf_counter() - mark
        if agent_error is not None:
            if task.expect == "failure":
                state.outcome.failed = True
                state.outcome.failure = f"{type(agent_error).__name__}: {agent_error}"
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
        )
        with calls_as("grader"):
            state.scores = await _grade(item.graders, grade_ctx, expect=task.expect)
        timing.grading_s = time.perf_counter() - mark
        state.phase = "done"

    async def _converse(
        self, ctx: TrialContext, recorder: TranscriptRecorder, outcome: Outcome
    ) -> Exception | None:
        """Send each user turn; returns the exception the agent raised, if it raised."""
        session = None
        try:
            session = await self.harness.session(ctx)
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
                outcome.output = reply.output
                outcome.state.update(reply.state)
                if reply.is_error:
                    outcome.failed = True
                    outcome.failure = reply.error or reply.output or "the agent reported failure"
                    break
        except Exception as exc:
            return exc
        finally:
            if session is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await session.close()
                    except Exception as exc:  # a failing close must not hide the trial's result
                        recorder.transcript.messages.append(
                            Message(role="system", content=f"session.close() raised {exc!r}")
                        )
        return None

    async def _teardown(self, state: _TrialState) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.env.teardown(state.world)
            except Exception as exc:
                if state.error is None:
                    state.status = TrialStatus.ERROR
                    state.error = ErrorInfo.from_exception(exc, phase="teardown")

    @staticmethod
    def _verdict(state: _TrialState) -> Verdict:
        if state.status is not TrialStatus.COMPLETED:
            return Verdict.ERROR
        return combine_verdicts([s.verdict for s in state.scores])


class _TrialState:
    __slots__ = ("error", "outcome", "phase", "scores", "status", "world", "world_ready")

    def __init__(self) -> None:
        self.status = TrialStatus.COMPLETED
        self.error: ErrorInfo | None = None
        self.outcome = Outcome()
        self.scores: list[Score] = []
        self.world: Any = None
        self.world_ready = False
        self.phase = "setup"

    def fail_with(self, exc: BaseException, phase: str) -> None:
        self.status = TrialStatus.ERROR
        self.error = ErrorInfo.from_exception(exc, phase=phase)


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
        )
    )


_COMPLETED = "agent_completed"


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


def _cost(calls: Sequence[Any]) -> float | None:
    if not calls:
        return None
    total = 0.0
    for call in calls:
        if call.cost_usd is None:
            return None
        total += call.cost_usd
    return total


def _grader_cost(calls: Sequence[Any]) -> float | None:
    """Graders that called no model cost nothing; otherwise the sum, `None` if any is unknown."""
    graded = [c for c in calls if c.role == "grader"]
    return _cost(graded) if graded else 0.0


def _model_name(model: str | Model | None) -> str | None:
    return model.id if isinstance(model, Model) else model


class _Budget:
    """Dollars spent by finished trials, against `--max-cost`."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0

    def add(self, trial: Trial) -> None:
        """Count what the trial's live calls cost; replayed calls spent nothing."""
        for call in trial.transcript.model_calls:
            if call.cost_usd is not None and not call.replayed:
                self.spent += call.cost_usd

    def spent_out(self) -> bool:
        return self.limit is not None and self.spent >= self.limit


def run_sync(suite: Suite, **options: Any) -> Report:
    """Run `suite` and return its report; `options` are those of `Runner`."""
    runner = Runner(**options)
    return anyio.run(runner.run, suite)
