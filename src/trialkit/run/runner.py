"""The runner: plans trials, runs them with bounded concurrency, grades, stores and reports.

See DESIGN §2 for the flow of one trial. Every exception inside a trial becomes data on the
trial; nothing a trial does cancels the run.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio
import anyio.to_thread

from trialkit._errors import RunFailed, find
from trialkit._gc import fewer_collections
from trialkit._sync import run_blocking
from trialkit.capture.scope import offline_run
from trialkit.consistency import CONFIG_KEY as CONSISTENCY_KEY
from trialkit.consistency import ConsistencyTally
from trialkit.consistency import from_config as consistency_of_config
from trialkit.consistency import to_config as consistency_config
from trialkit.harness.base import Harness
from trialkit.models.context import use_settings
from trialkit.models.pricing import Budget, run_calls_summary
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
from trialkit.run.planner import EmptySelection as EmptySelection
from trialkit.run.planner import Planner, Work
from trialkit.run.retries import CONFIG_KEY as RETRIED_KEY
from trialkit.run.retries import record_retries, retried_of, retry_attempts
from trialkit.run.settings import RunSettings
from trialkit.run.tally import TaskTally
from trialkit.run.trial import PlannedTask
from trialkit.score import Verdict
from trialkit.task import Suite, SuiteError
from trialkit.trial import Trial

if TYPE_CHECKING:
    from trialkit.exporters.base import Exporter
    from trialkit.run.progress import Progress
    from trialkit.run.rerun import RerunOnly
    from trialkit.store import Store


def new_run_id() -> str:
    """A run id that sorts by start time and is unique: `20261129T231500-1a2b3c`."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


RunTrial: TypeAlias = Callable[[PlannedTask, int], Awaitable[Trial]]


class Runner(Planner):
    """Runs suites: plans them (`Planner`), runs the trials with bounded concurrency, grades,
    stores and reports.

    `store` is a `Store` or a store URL / SQLite path; without one nothing is kept. With
    `workers` > 1 or `executor="ray"` the suite must come from `load_target` (or `trialkit
    run`), so the workers can load it.
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
        super().__init__(settings, harness=harness, **options)
        if isinstance(store, str):
            from trialkit.store import Store, resolve_store_url

            store = Store(resolve_store_url(store))
        self.store = store
        self.progress = progress
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
        self.adaptive = Adaptive.from_config(stored_policy) if stored_policy else None
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
        todo: Work,
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
                await trial_runner.aclose()
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
