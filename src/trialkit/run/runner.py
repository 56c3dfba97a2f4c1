"""The runner: plans trials, runs them with bounded concurrency, grades, stores and reports.

See DESIGN §2 for the flow of one trial. Every exception inside a trial becomes data on the
trial; nothing a trial does cancels the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import anyio.to_thread

from trialkit._errors import RunFailed, find
from trialkit._gc import fewer_collections
from trialkit._sync import run_blocking
from trialkit.capture.scope import offline_config, offline_run
from trialkit.consistency import CONFIG_KEY as CONSISTENCY_KEY
from trialkit.consistency import ConsistencyTally
from trialkit.consistency import from_config as consistency_of_config
from trialkit.consistency import to_config as consistency_config
from trialkit.environments.base import NO_ENVIRONMENT
from trialkit.graders.base import as_grader
from trialkit.graders.human import with_review
from trialkit.graders.text import agent_failed
from trialkit.harness.base import Harness
from trialkit.harness.chat import ChatHarness
from trialkit.harness.function import as_harness
from trialkit.models.base import Model
from trialkit.models.context import ModelSettings, use_settings
from trialkit.models.pricing import Budget, run_calls_summary
from trialkit.models.retry import RetryPolicy
from trialkit.report import (
    MAX_RESULTS_PER_TASK,
    Report,
    RunInfo,
    SuiteInfo,
    TaskPlan,
    tallied_report,
)
from trialkit.run._writer import TrialWriter
from trialkit.run.adaptive import Adaptive, AdaptiveQueue
from trialkit.run.preflight import check_executor, check_models, judge_models
from trialkit.run.retries import CONFIG_KEY as RETRIED_KEY
from trialkit.run.retries import record_retries, retried_of, retry_attempts
from trialkit.run.settings import RunSettings
from trialkit.run.tally import TaskTally
from trialkit.run.trial import PlannedTask, TrialRunner, model_name
from trialkit.score import Verdict
from trialkit.task import Suite, SuiteError, Task
from trialkit.trial import Trial

if TYPE_CHECKING:
    from trialkit.exporters.base import Exporter
    from trialkit.run.progress import Progress
    from trialkit.run.rerun import RerunOnly
    from trialkit.store import Store


class EmptySelection(SuiteError):
    """The task selection is empty: nothing would run (exit 2, never a green run)."""


def new_run_id() -> str:
    """A run id that sorts by start time and is unique: `20261129T231500-1a2b3c`."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


_Work: TypeAlias = "list[tuple[PlannedTask, int]] | AdaptiveQueue[PlannedTask]"
RunTrial: TypeAlias = Callable[[PlannedTask, int], Awaitable[Trial]]


class Runner:
    """Runs suites. Its `RunSettings` override the suite's options (like the CLI flags do).

    `store` is a `Store` or a store URL / SQLite path; without one nothing is kept.
    `workers` > 1 runs the trials in that many child processes (see `trialkit.executors`);
    `executor="ray"` runs them in Ray actors (`workers` of them; by default one per CPU of the
    cluster). The suite must then come from `load_target` (or `trialkit run`), so they can
    load it. `min_pass_rate` and `fail_on_error` are the thresholds of the CI gate
    (`Report.gate()`), kept with the run so that every report of it states the same verdict.
    """

    def __init__(
        self,
        settings: RunSettings | None = None,
        *,
        store: Store | str | None = None,
        harness: Any = None,
        progress: Progress | None = None,
        exporters: Sequence[Exporter] = (),
        **options: Any,
    ) -> None:
        """`settings` (or the same fields as keyword `options`; both: the options win)."""
        if settings is None:
            settings = RunSettings(**options)
        elif options:
            settings = settings.replace(**options)
        if settings.elsewhere and harness is not None:
            raise ValueError(
                "a harness given to the Runner cannot be sent to worker processes or Ray "
                "actors: put it on the suite, or run in this process"
            )
        if isinstance(store, str):
            from trialkit.store import Store, resolve_store_url

            store = Store(resolve_store_url(store))
        self.options = settings
        """The settings this runner was made with."""
        self.store = store
        self.concurrency = settings.concurrency
        self.trials = settings.trials
        self.timeout = settings.timeout
        self.task_ids = settings.task_ids
        self.tags = settings.tags
        self.name = settings.name
        self.harness_override = harness
        self.progress = progress
        self.model = settings.model
        self.settings = ModelSettings(
            cassette=settings.cassette,
            retry=settings.retry or RetryPolicy(),
            default_model=settings.model,
            judge_model=settings.judge_model,
            capture=settings.capture,
            offline=settings.offline,
        )
        self.max_cost = settings.max_cost
        self.gate = {
            "min_pass_rate": settings.min_pass_rate,
            "fail_on_error": settings.fail_on_error,
        }
        """The thresholds of `Report.gate()`, kept with the run so every report of it (even one
        written later by `trialkit report`) states the same verdict."""
        self.adaptive = settings.adaptive
        """Sample each task only while it is undecided (see `trialkit.run.adaptive`)."""
        executor = settings.executor
        self.executor = executor
        """Where trials run: `local` (this process, or worker processes) or `ray`."""
        self.ray_actors = settings.workers if executor == "ray" else None
        """Ray actors to start; None: one per CPU of the cluster."""
        self.workers = 1 if executor == "ray" or settings.workers is None else settings.workers
        """Processes that run trials; 1 runs them in this process."""
        self.exporters = list(exporters)
        self.export_errors: list[str] = []
        """Exporter hooks that raised, one line each: an exporter never stops a run."""
        self.notices: list[str] = []
        """What a user should know after a run that is not an error (a `record` run that
        recorded nothing), one line each."""
        self.last_run: RunInfo | None = None
        """The run being (or last) run, so a caller can name it after an interruption."""
        self.finished = 0
        """Trials of the current run that finished (and are stored, when there is a store)."""

    def plan(self, suite: Suite) -> list[PlannedTask]:
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
            graders = with_review([*suite_graders, *own], task)
            planned.append(
                PlannedTask(
                    task=task,
                    graders=graders,
                    trials=suite.trials_for(task, self.trials),
                    timeout=suite.timeout_for(task, self.timeout),
                )
            )
        return planned

    def check(self, suite: Suite) -> None:
        """Refuse a run of `suite` that cannot work, before anything is stored: an empty
        selection, a harness that is not one, a model that cannot be called here (no SDK, key
        or weights), an executor that is not installed. Raises `SuiteError`."""
        self.harness_for(suite, self.plan(suite))

    def most_trials(self, suite: Suite) -> int:
        """How many trials a run of `suite` takes (with adaptive trials: at most)."""
        planned = self.plan(suite)
        if self.adaptive is not None:
            cap = self.adaptive.max_trials
            return sum(cap or p.trials for p in planned)
        return sum(p.trials for p in planned)

    def harness_for(self, suite: Suite, planned: list[PlannedTask]) -> Harness:
        """The harness that runs `planned` (checked: it exists, its models are known)."""
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
        check_executor(self.executor)
        models = self._models_of(harness, suite, planned)
        check_models(f"suite {suite.id!r}", models, self.settings.cassette)
        return harness

    def _models_of(
        self, harness: Harness, suite: Suite, planned: list[PlannedTask]
    ) -> Iterator[str | Model]:
        """Every model the run will call: the agent's and the judges'."""
        for p in planned:
            for model in (self._model_for(harness, suite, p.task), p.task.model):
                if model is not None:
                    yield model
        own = getattr(harness, "model", None)  # e.g. a ToolAgent's (a string is a label)
        if isinstance(own, Model):
            yield own
        fallback = self.settings.judge_model or suite.model or self.model
        for p in planned:
            yield from judge_models(p.graders, fallback)

    def _model_for(self, harness: Harness, suite: Suite, task: Task | None) -> str | Model | None:
        """The model that answers `task`: a chat harness's own, else task → suite → option."""
        if isinstance(harness, ChatHarness) and harness.model is not None:
            return harness.model
        own = task.model if task is not None else None
        return own or suite.model or self.model

    def _export(self, hook: str, *args: Any) -> None:
        for exporter in self.exporters:
            try:
                getattr(exporter, hook)(*args)
            except Exception as exc:
                self.export_errors.append(f"{type(exporter).__name__}.{hook}: {exc}")

    async def run(
        self,
        suite: Suite,
        *,
        resume: str | None = None,
        retry_errors: bool = False,
        rerun: str | None = None,
        only: RerunOnly = "failed",
    ) -> Report:
        """Run every selected task's trials and return the report.

        Each trial is stored as soon as it is graded. If the run is cancelled (Ctrl-C), the
        trials that finished are stored, the run is marked `interrupted`, and the cancellation
        propagates. With `resume` (a stored run's id), only the trials that run lacks are run
        (and, with `retry_errors`, those that errored), and the report covers the whole run.
        With `rerun` (a stored run's id), a new run takes only the tasks of that run whose
        verdict `only` names (`failed`, `errored`, `not-passed`), and names the run it reran.
        """
        if self.workers > 1 or self.executor == "ray":
            from trialkit.executors.processes import check_source

            check_source(suite)
        # From planning to the report: a run of many tasks builds a record or two per task,
        # and CPython's default thresholds would walk them all again and again (10,000 tasks:
        # half the report's time).
        with fewer_collections():
            if resume is not None:
                if rerun is not None:
                    raise SuiteError("resume a run or rerun one, not both")
                return await self._resume(suite, resume, retry_errors)
            origin: dict[str, Any] = {}
            if rerun is not None:
                self.task_ids = await self._rerun_selection(suite, rerun, only)
                origin = {"rerun_of": rerun, "rerun_only": only}
            planned = self.plan(suite)
            # A writer process (for a large run) starts now, so its imports overlap the run's own
            # start instead of holding back its first trials.
            writer = TrialWriter(self.store, trials=sum(p.trials for p in planned))
            try:
                return await self._run_planned(suite, planned, origin, writer)
            finally:
                writer.shut()

    async def _run_planned(
        self,
        suite: Suite,
        planned: list[PlannedTask],
        origin: dict[str, Any],
        writer: TrialWriter,
    ) -> Report:
        harness = self.harness_for(suite, planned)
        run = RunInfo(
            id=new_run_id(),
            name=self.name,
            started_at=datetime.now(UTC),
            status="running",
            config={**self.run_config(suite, harness), **origin},
        )
        suite_info = SuiteInfo(id=suite.id, kind=suite.kind, description=suite.description)
        adaptive = self.adaptive is not None  # a task then stops once its verdict is clear
        plans = [
            TaskPlan.of(p.task, suite.task_kind(p.task), trials=None if adaptive else p.trials)
            for p in planned
        ]
        store = self.store

        async def create() -> None:
            if store is not None:
                await anyio.to_thread.run_sync(store.create_run, run, suite_info, plans)

        todo = self._schedule(suite, planned, {})
        tallies = {p.task.id: TaskTally(MAX_RESULTS_PER_TASK) for p in planned}
        report = await self._execute(
            suite,
            harness,
            run,
            suite_info,
            todo,
            tallies,
            plans=plans,
            create=create,
            writer=writer,
        )
        return report or tallied_report(run, suite_info, plans, tallies)

    async def _rerun_selection(self, suite: Suite, run_id: str, only: RerunOnly) -> tuple[str, ...]:
        """`--task` patterns for exactly the tasks of stored run `run_id` that `only` names."""
        from trialkit.run.rerun import exact_pattern, rerun_tasks

        if self.store is None:
            raise SuiteError("rerunning a run needs the store it was written to")
        chosen = await anyio.to_thread.run_sync(
            rerun_tasks, self.store, run_id, only, suite, self.task_ids
        )
        return tuple(exact_pattern(task_id) for task_id in chosen)

    def run_config(self, suite: Suite, harness: Harness) -> dict[str, Any]:
        """The settings a new run of `suite` by `harness` records (`RunInfo.config`)."""
        return {
            "concurrency": self.concurrency,
            "trials": self.trials,
            "timeout": self.timeout,
            "task_ids": list(self.task_ids),
            "tags": list(self.tags),
            "planned_trials": self.most_trials(suite),
            "harness": getattr(harness, "name", type(harness).__name__),
            "model": model_name(self._model_for(harness, suite, None))
            if isinstance(harness, ChatHarness)
            else None,
            "judge_model": self.settings.judge_model,
            "max_cost": self.max_cost,
            "gate": self.gate,
            "cache": self._cache_config(),
            **({"source": dataclasses.asdict(suite.source)} if suite.source else {}),
            **({"workers": self.workers} if self.workers > 1 else {}),
            **({"executor": "ray"} if self.executor == "ray" else {}),
            **self._adaptive_config(),
        }

    def _selects(self) -> bool:
        """Whether only some tasks run (`--task`, `--tag`)."""
        return bool(self.task_ids or self.tags)

    def _cache_config(self) -> dict[str, Any]:
        cassette = self.settings.cassette
        network = {"capture": self.settings.capture, **offline_config(self.settings.offline)}
        if cassette is None:
            return {"mode": "live", **network}
        return {"mode": cassette.mode.value, "folder": str(cassette.root), **network}

    def _adaptive_config(self) -> dict[str, Any]:
        if self.adaptive is None:
            return {}
        policy = self.adaptive
        return {
            "adaptive": {
                "max_trials": policy.max_trials,
                "precision": policy.precision,
                "min_trials": policy.min_trials,
                **(
                    {}
                    if policy.baseline is None
                    else {
                        "baseline": {k: list(v) for k, v in policy.baseline.items()},
                        "alpha": policy.alpha,
                    }
                ),
                "stopped": {},
            }
        }

    def _schedule(
        self, suite: Suite, planned: list[PlannedTask], done: dict[tuple[str, int], Verdict]
    ) -> _Work:
        """The trials to run: a fixed list, or an adaptive queue seeded with `done` ones."""
        if self.adaptive is None:
            return [(p, i) for p in planned for i in range(p.trials) if (p.task.id, i) not in done]
        queue = AdaptiveQueue(
            self.adaptive,
            [(p.task.id, suite.task_kind(p.task), p.trials, p) for p in planned],
            workers=self.concurrency,
        )
        for (task_id, index), verdict in sorted(done.items()):
            if task_id in queue.tallies:
                queue.seed(task_id, index, verdict)
        return queue

    async def _resume(self, suite: Suite, run_id: str, retry_errors: bool) -> Report:
        from trialkit.store.resume import load_run, stored_verdicts

        if self.store is None:
            raise SuiteError("resuming a run needs the store it was written to")
        store = self.store
        run, suite_info, stored_plans = load_run(store, run_id)
        if suite_info.id != suite.id:
            raise SuiteError(
                f"run {run_id!r} ran suite {suite_info.id!r}, not {suite.id!r}: "
                "resume it with the suite it ran"
            )
        # The run keeps the selection and trial counts it started with.
        config = run.config
        self.trials = config.get("trials")
        stored_policy = config.get("adaptive")
        self.adaptive = (
            Adaptive(
                max_trials=stored_policy.get("max_trials"),
                precision=stored_policy["precision"],
                min_trials=stored_policy["min_trials"],
                baseline=_stored_baseline(stored_policy.get("baseline")),
                alpha=stored_policy.get("alpha", 0.05),
            )
            if stored_policy
            else None
        )
        self.timeout = config.get("timeout")
        self.task_ids = tuple(config.get("task_ids") or ())
        self.tags = tuple(config.get("tags") or ())
        planned = self.plan(suite)
        missing = [p.id for p in stored_plans if p.id not in {q.task.id for q in planned}]
        if missing:
            raise SuiteError(
                f"run {run_id!r} has tasks the suite no longer has: {', '.join(missing)}"
            )
        planned = [q for q in planned if q.task.id in {p.id for p in stored_plans}]
        harness = self.harness_for(suite, planned)
        done = await anyio.to_thread.run_sync(stored_verdicts, store, run_id)
        retried = {key for key, v in done.items() if v is Verdict.ERROR} if retry_errors else set()
        done = {key: v for key, v in done.items() if key not in retried}
        todo = self._schedule(suite, planned, done)
        run.status = "running"
        run.finished_at = None
        run.config["resumed"] = int(config.get("resumed") or 0) + 1
        run.config["gate"] = self.gate  # the thresholds of the run that finishes it
        run.config.pop("stop_reason", None)
        await anyio.to_thread.run_sync(store.finish_run, run)
        attempts = retry_attempts(retried_of(run.config), retried)
        await self._execute(
            suite, harness, run, suite_info, todo, {}, stored_before=len(done), attempts=attempts
        )
        if retried or retried_of(run.config):
            await anyio.to_thread.run_sync(_record_retries, store, run, retried)
        return await anyio.to_thread.run_sync(store.load_report, run.id)

    async def _execute(
        self,
        suite: Suite,
        harness: Harness,
        run: RunInfo,
        suite_info: SuiteInfo,
        todo: _Work,
        tallies: dict[str, TaskTally],
        *,
        plans: Sequence[TaskPlan] | None = None,
        create: Callable[[], Awaitable[None]] | None = None,
        stored_before: int = 0,
        writer: TrialWriter | None = None,
        attempts: Mapping[tuple[str, int], int] | None = None,
    ) -> Report | None:
        """Run the `todo` trials on bounded workers, store and export each, and close the run.

        `tallies` keep what a report needs of each trial (`trialkit.run.tally`: running figures,
        not the trials), for the tasks they have a tally of. With `plans` (every task of the
        run, each with a tally), the run's report is made from them when it ends, handed to
        the store to keep (it need not compute it again) and returned.
        `create` stores a new run, once its executor has started: a run whose workers or
        cluster cannot start leaves nothing behind. `stored_before`: the finished trials a
        resumed run had stored already. `writer`: the run's trial writer, if made already.
        `attempts`: the attempt of each (task, index) run again after an error.
        """
        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = max(threads.total_tokens, self.concurrency)
        self.last_run = run
        self.finished = 0
        settings = self.run_settings(suite)
        if settings.capture or settings.offline:  # first: what starts below is the run's own
            from trialkit.capture.hook import install

            install(offline=settings.offline)
        self._export("on_run_start", run, suite_info)
        if isinstance(todo, AdaptiveQueue):
            adaptive, fixed = todo, None
            total = todo.remaining()  # at most: adaptive runs usually stop before
        else:
            adaptive, fixed = None, iter(todo)
            total = len(todo)
        if self.progress is not None:
            self.progress.start(total)
        trial_runner = self.trial_runner(run.id, suite, harness)
        budget = Budget(self.max_cost)
        consistency = ConsistencyTally(consistency_of_config(run.config))
        run_trial: RunTrial = trial_runner.run

        async def take() -> tuple[PlannedTask, int] | None:
            if budget.spent_out():
                return None
            if adaptive is not None:
                return await adaptive.next()
            assert fixed is not None
            return next(fixed, None)

        async def worker() -> None:
            while (picked := await take()) is not None:
                item, index = picked
                trial = await run_trial(item, index)
                if attempts:
                    trial.attempt = attempts.get((item.task.id, index), trial.attempt)
                if adaptive is not None:
                    adaptive.finished(item.task.id, trial.verdict)
                budget.add(trial)
                consistency.add_trial(trial)
                kept = tallies.get(item.task.id)
                if kept is not None:
                    kept.add_trial(trial)
                await writing.put(trial)
                self._export("on_trial", trial)
                self.finished += 1
                if self.progress is not None:
                    self.progress.advance(trial)
                await writing.give_way()

        writing = writer or TrialWriter(self.store, trials=total)
        stored = create is None
        running = False
        report: Report | None = None
        broken: Exception | None = None  # trialkit's own machinery failed mid-run: exit 4
        unattributed: list[str] = []  # --offline refusals made while no trial ran
        try:
            with use_settings(settings), fewer_collections(), offline_run(settings, unattributed):
                async with self._executor(suite, run, total) as executor:
                    if create is not None:
                        await create()
                        stored = True
                    running = True
                    run_trial = executor or run_trial
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(writing.loop)
                        async with anyio.create_task_group() as workers:
                            for _ in range(min(self.concurrency, total)):
                                workers.start_soon(worker)
                        writing.close()
            run.status = "completed"
            if budget.spent_out() and self.finished < total:
                run.status = "stopped"
                run.config["stop_reason"] = (
                    f"the cost budget of ${self.max_cost:g} was spent (${budget.spent:.4f}) "
                    f"after {self.finished} of {total} trials"
                )
        except BaseException as exc:
            run.status = "interrupted"  # what finished is stored, and --resume continues
            broken = _machinery_failure(exc) if running else None
            if broken is None:
                raise
        finally:
            if adaptive is not None:
                run.config["adaptive"]["stopped"] = adaptive.stop_reasons()
            if settings.run_calls:
                run.config["judge_controls"] = run_calls_summary(settings.run_calls)
            if consistency:
                run.config[CONSISTENCY_KEY] = consistency_config(consistency.results())
            if unattributed:
                run.config["cache"]["offline_refused"] = unattributed[:20]
                self.notices.extend(unattributed[:20])
            run.finished_at = datetime.now(UTC)
            try:
                try:
                    writing.flush_now()
                finally:
                    writing.shut()
                if plans is not None and run.status != "interrupted":
                    report = tallied_report(run, suite_info, plans, tallies)
                    tallies.clear()  # the report has what it needs of them
                if self.store is not None and stored:
                    self.store.finish_run(run, report=report)
            except Exception as exc:
                from trialkit.store.errors import StoreError  # loaded: a store is open

                if not isinstance(exc, StoreError):
                    raise
                # The store broke: stop as a run that could not finish, or let what was
                # already propagating (Ctrl-C) go on.
                broken = broken or exc
                run.status = "interrupted"
            if self.progress is not None:
                self.progress.stop()
            with anyio.CancelScope(shield=True):
                await harness.aclose()
            if (cassette := self.settings.cassette) is not None:
                whole = run.status == "completed" and create is not None and not self._selects()
                if cassette.mode == "record" and not cassette.used_keys():
                    self.notices.append(_nothing_recorded(cassette.root, settings.capture))
                else:
                    cassette.write_manifest(suite.id, complete=whole)
            self._export("on_run_end", run)
        if broken is not None:
            from trialkit.store.errors import StoreError

            reason = str(broken) or type(broken).__name__
            store = self.store
            if isinstance(broken, StoreError) and store is not None and store.url not in reason:
                reason = f"the store {store.url}: {reason}"  # the line names the store
            stored_trials = stored_before + writing.saved
            raise RunFailed(reason, run_id=run.id, stored=stored_trials) from broken
        return report

    def trial_runner(self, run_id: str, suite: Suite, harness: Harness) -> TrialRunner:
        """What runs one trial of `suite` in this process."""
        environment = suite.environment or NO_ENVIRONMENT
        return TrialRunner(
            run_id, suite, harness, environment, lambda task: self._model_for(harness, suite, task)
        )

    def run_settings(self, suite: Suite) -> ModelSettings:
        """The model settings of a run of `suite`."""
        fallback = suite.model or self.model
        judge_model = self.settings.judge_model
        if judge_model is None and isinstance(fallback, str):
            judge_model = fallback  # DESIGN §2: the suite's model (else --model) judges too
        return dataclasses.replace(self.settings, judge_model=judge_model, run_calls=[])

    @contextlib.asynccontextmanager
    async def _executor(
        self, suite: Suite, run: RunInfo, total: int
    ) -> AsyncIterator[RunTrial | None]:
        """Worker processes or Ray actors that run trials; None: in this process."""
        if self.executor == "ray" and total > 0:
            from trialkit.executors.ray import open_ray_pool

            async with open_ray_pool(
                suite, self, run.id, actors=self.ray_actors, concurrency=self.concurrency
            ) as ray_pool:
                run.config["ray_actors"] = ray_pool.size
                yield ray_pool.run
            return
        if self.workers == 1 or total == 0:
            yield None
            return
        from trialkit.executors.processes import open_pool

        share = -(-self.concurrency // self.workers)
        workers = min(self.workers, total, self.concurrency)  # each runs at least one trial
        async with open_pool(suite, self, run.id, workers=workers, concurrency=share) as pool:
            yield pool.run


def _stored_baseline(value: Any) -> dict[str, tuple[int, int]] | None:
    """The adaptive policy's baseline trials as a run's config keeps them."""
    if not isinstance(value, dict):
        return None
    return {str(k): (int(v[0]), int(v[1])) for k, v in value.items()}


def _record_retries(store: Store, run: RunInfo, retried: set[tuple[str, int]]) -> None:
    """Keep in the run which trials were run again after an error, and the first-attempt
    figures (`trialkit.run.retries`)."""
    from trialkit.store.resume import stored_verdicts

    value = record_retries(retried_of(run.config), retried, stored_verdicts(store, run.id))
    if value is not None:
        run.config[RETRIED_KEY] = value
        store.finish_run(run)


def _machinery_failure(exc: BaseException) -> Exception | None:
    """The failure of trialkit's own machinery in `exc` (or in its exception groups): the
    store refused to save, or the executor's workers kept dying; `None` for anything else."""
    from trialkit.executors.processes import WorkerError
    from trialkit.store.errors import StoreError

    return find(exc, (StoreError, WorkerError))


def run_sync(
    suite: Suite,
    *,
    resume: str | None = None,
    retry_errors: bool = False,
    rerun: str | None = None,
    only: RerunOnly = "failed",
    **options: Any,
) -> Report:
    """Run `suite` and return its report; `options` are those of `Runner` (a `RunSettings`
    as `settings=`, or its fields).

    `resume` finishes a stored run, `rerun` runs again what did not pass in one (give
    `store=` too); see `Runner.run`. Called where an event
    loop is running already (an async test, a Jupyter notebook), the suite runs on a loop of
    its own in a worker thread and this call waits for it.
    """
    runner = Runner(**options)
    return run_blocking(
        functools.partial(
            runner.run, suite, resume=resume, retry_errors=retry_errors, rerun=rerun, only=only
        )
    )


def _nothing_recorded(root: Path, capture: bool) -> str:
    how = (
        "capture is off (--no-capture), so only calls through trialkit's models count"
        if not capture
        else "trialkit sees calls through its own models and an agent's httpx/httpx2 clients "
        "(the official SDKs and the frameworks on them)"
    )
    return (
        f"--cache-mode record recorded nothing in {root}: no trial made a model call; {how}; "
        "see docs/guide.md, 'Evaluate the agent you already have'"
    )
