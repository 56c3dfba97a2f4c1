"""A run that trials are added to bit by bit: open it, run some tasks' trials into it, close it.

`Runner.run(suite)` runs a whole suite as one run. The pytest plugin runs one task per test
item, in pytest's order, and still keeps one stored run per suite: it makes a `RunSession`,
runs each item's task into it with `run_task`, and closes it when the pytest session ends.

Several processes (pytest-xdist workers) may add to one run: each makes its session with the
same `run_id` and the same tasks; the first to `open` stores the run, the others join it, and
one of them (or the process that started them) ends it with `finish_stored_run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.to_thread

from trialkit.models.context import use_settings
from trialkit.report import (
    Report,
    RunInfo,
    SuiteInfo,
    TaskPlan,
    TaskReport,
    TrialResult,
    build_report,
    build_task_report,
)
from trialkit.run._writer import TrialWriter
from trialkit.run.planner import EmptySelection
from trialkit.run.runner import Runner, new_run_id
from trialkit.run.trial import PlannedTask
from trialkit.trial import Trial

if TYPE_CHECKING:
    from trialkit.store import Store
    from trialkit.task import Suite

RunStatus = Literal["completed", "interrupted", "stopped"]


class RunSession:
    """One run of `suite` whose tasks' trials are run a task at a time, by `runner`.

    `task_ids` are the tasks the run plans (default: the runner's selection of the suite); the
    report covers them all, so a planned task that never ran is an error in it. Trials are
    stored as soon as they are graded, as in `Runner.run`. The runner's `workers` and
    `executor` are not used: trials run in this process.
    """

    def __init__(
        self,
        runner: Runner,
        suite: Suite,
        *,
        run_id: str | None = None,
        task_ids: Sequence[str] | None = None,
    ) -> None:
        planned = runner.plan(suite)
        if task_ids is not None:
            wanted = set(task_ids)
            planned = [p for p in planned if p.task.id in wanted]
            if not planned:
                raise EmptySelection(f"suite {suite.id!r}: no tasks selected; nothing to run")
        self.runner = runner
        self.suite = suite
        self.planned: dict[str, PlannedTask] = {p.task.id: p for p in planned}
        self.harness = runner.harness_for(suite, planned)
        self.run = RunInfo(
            id=run_id or new_run_id(),
            name=runner.name,
            started_at=datetime.now(UTC),
            status="running",
            config=runner.run_config(suite, self.harness),
        )
        """The run; its `status` and `finished_at` are set by `close`."""
        self.suite_info = SuiteInfo(id=suite.id, kind=suite.kind, description=suite.description)
        adaptive = runner.adaptive is not None  # a task then stops once its verdict is clear
        self.plans = [
            TaskPlan.of(p.task, suite.task_kind(p.task), trials=None if adaptive else p.trials)
            for p in planned
        ]
        self.results: dict[str, list[TrialResult]] = {p.task.id: [] for p in planned}
        """What a report needs of each trial this session ran, by task."""
        self.model_settings = runner.run_settings(suite)
        self._trial_runner = runner.trial_runner(self.run.id, suite, self.harness)
        self._opened = False
        self._closed = False

    @property
    def store(self) -> Store | None:
        return self.runner.store

    async def open(self) -> None:
        """Store the run, once. A run that another process stored under the same id (with
        the same tasks) is joined: this session's trials are added to it."""
        if self._opened:
            return
        store = self.store
        if store is not None:
            await anyio.to_thread.run_sync(self._create_or_join, store)
        self._opened = True

    def _create_or_join(self, store: Store) -> None:
        from trialkit.store import StoreError

        if _exists(store, self.run.id):
            return
        try:
            store.create_run(self.run, self.suite_info, self.plans)
        except StoreError:
            if not _exists(store, self.run.id):  # not a race with another process: a failure
                raise

    async def run_task(self, task_id: str, *, concurrency: int | None = None) -> list[Trial]:
        """Run every trial of the planned task `task_id` (up to `concurrency` at once, by
        default the runner's), store each as soon as it is graded, and return them in order."""
        if self._closed:
            raise RuntimeError(f"run {self.run.id}: the session is closed")
        item = self.planned.get(task_id)
        if item is None:
            raise KeyError(f"run {self.run.id}: task {task_id!r} is not planned")
        await self.open()
        limit = max(1, concurrency or self.runner.concurrency)
        threads = anyio.to_thread.current_default_thread_limiter()
        threads.total_tokens = max(threads.total_tokens, limit)
        pending = iter(range(item.trials))
        done: list[Trial] = []
        writer = TrialWriter(self.store)

        async def worker() -> None:
            for index in pending:
                trial = await self._trial_runner.run(item, index)
                done.append(trial)
                self.results[task_id].append(TrialResult.from_trial(trial))
                await writer.put(trial)
                self.runner.finished += 1

        settings = self.model_settings
        if settings.capture or settings.offline:
            from trialkit.capture.hook import install

            install(offline=settings.offline)
        try:
            with use_settings(settings):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(writer.loop)
                    async with anyio.create_task_group() as workers:
                        for _ in range(min(limit, item.trials)):
                            workers.start_soon(worker)
                    writer.close()
        finally:
            writer.flush_now()
        return sorted(done, key=lambda t: t.index)

    def task_report(self, task_id: str) -> TaskReport:
        """The report of `task_id` from the trials this session ran of it."""
        plan = next(p for p in self.plans if p.id == task_id)
        return build_task_report(plan, self.results[task_id])

    def report(self) -> Report:
        """The report of the trials this session ran (the stored run may hold more)."""
        return build_report(self.run, self.suite_info, self.plans, self.results)

    async def close(
        self, *, status: RunStatus = "completed", reason: str | None = None, finish: bool = True
    ) -> None:
        """End the session: close the harness, note the cassette's keys, and (with `finish`)
        record the run's end in the store. A process that joined a run another one ends
        closes with `finish=False`."""
        if self._closed:
            return
        self._closed = True
        self.run.status = status
        self.run.finished_at = datetime.now(UTC)
        if reason is not None:
            self.run.config["stop_reason"] = reason
        with anyio.CancelScope(shield=True):
            await self.harness.aclose()
        cassette = self.model_settings.cassette
        if cassette is not None and self._opened:
            if cassette.mode == "record" and not cassette.used_keys():
                from trialkit.run.runner import _nothing_recorded

                capture = self.model_settings.capture
                self.runner.notices.append(_nothing_recorded(cassette.root, capture))
            else:
                cassette.write_manifest(self.suite.id, complete=False)
        if finish and self.store is not None and self._opened:
            await anyio.to_thread.run_sync(self.store.finish_run, self.run)


def finish_stored_run(
    store: Store, run_id: str, *, status: RunStatus = "completed", reason: str | None = None
) -> Report:
    """End the stored run `run_id` (that other processes added trials to) and return its
    report, computed by the store."""
    run = store.load_report(run_id, max_results=0).run
    run.status = status
    run.finished_at = datetime.now(UTC)
    if reason is not None:
        run.config["stop_reason"] = reason
    store.finish_run(run)
    return store.load_report(run_id)


def _exists(store: Store, run_id: str) -> bool:
    from trialkit.store import RunNotFound

    try:
        return store.resolve_run(run_id) == run_id
    except RunNotFound:
        return False
