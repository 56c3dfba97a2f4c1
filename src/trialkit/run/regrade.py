"""Regrade a stored run: score its trials again with the suite's current graders.

The agent does not run again. Each stored trial's transcript and outcome are graded as a trial
is (`trialkit.run.trial`), and the result is a new run in the same store that names the run it
regraded (`config["regrade_of"]`); the old run is never changed.

What is graded again (DESIGN §2): a trial that completed, and a trial that errored or timed
out while it was being graded (the agent had finished: a judge's replay miss, say). A trial
whose setup, agent or capture errored stays `error`, copied as it was: its outcome is never
regraded into a pass. A human's judgement is never redone: a score a reviewer labeled, and the
score of a `human()` grader, are kept as stored, and the old run's labels are copied to the new
one. Graders see no world (the trial's workspace is gone): a grader that reads
files of the workspace or queries the world scores `error`; `graders=` can leave it out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from trialkit._record import ErrorInfo
from trialkit._sync import run_blocking
from trialkit.capture.calls import flush_held
from trialkit.capture.scope import offline_config
from trialkit.consistency import CONFIG_KEY as CONSISTENCY_KEY
from trialkit.consistency import ConsistencyTally
from trialkit.consistency import to_config as consistency_config
from trialkit.graders.base import GradeContext, Grader, trial_verdict
from trialkit.graders.human import human
from trialkit.models.context import ModelSettings, calls_as, use_settings
from trialkit.models.pricing import run_calls_summary
from trialkit.report import Report, RunInfo
from trialkit.run._writer import TrialWriter
from trialkit.run.preflight import check_models, judge_models
from trialkit.run.retries import CONFIG_KEY as RETRIED_KEY
from trialkit.run.retries import record_retries, retried_of
from trialkit.run.settings import RunSettings
from trialkit.run.trial import _COMPLETED, PlannedTask, _cost, _grade, _grader_cost
from trialkit.score import Score, Verdict
from trialkit.task import Suite, SuiteError
from trialkit.transcript import TranscriptRecorder, Usage, activate, deactivate
from trialkit.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from trialkit.labels import Label
    from trialkit.store import Store

_REGRADED_STATUSES = (TrialStatus.COMPLETED, TrialStatus.ERROR, TrialStatus.TIMEOUT)


class RegradeError(SuiteError):
    """A regrade that cannot be done (exit 2 on the command line); nothing was stored."""


@dataclasses.dataclass
class VerdictChanges:
    """How the trials' verdicts moved from the old run to the new one."""

    pass_to_fail: int = 0
    fail_to_pass: int = 0
    other: int = 0
    """Any other change (to or from error or unknown)."""
    unchanged: int = 0

    @property
    def changed(self) -> int:
        return self.pass_to_fail + self.fail_to_pass + self.other

    def add(self, old: Verdict, new: Verdict) -> None:
        if old is new:
            self.unchanged += 1
        elif (old, new) == (Verdict.PASS, Verdict.FAIL):
            self.pass_to_fail += 1
        elif (old, new) == (Verdict.FAIL, Verdict.PASS):
            self.fail_to_pass += 1
        else:
            self.other += 1

    def summary(self) -> str:
        """`3 verdicts changed (pass→fail 2, fail→pass 1, other 0) of 10 trials`."""
        total = self.changed + self.unchanged
        noun = "verdict" if self.changed == 1 else "verdicts"
        return (
            f"{self.changed} {noun} changed (pass→fail {self.pass_to_fail}, "
            f"fail→pass {self.fail_to_pass}, other {self.other}) of {total} trials"
        )


@dataclasses.dataclass
class Regrade:
    """What a regrade made: the new run's report and how its verdicts differ."""

    report: Report
    regrade_of: str
    changes: VerdictChanges


def source_suite(config: dict[str, Any], target: str | None, *, run_id: str) -> Suite:
    """The suite a stored run ran, loaded again from its recorded source (`target`, if given,
    instead), relative to the folder it was loaded from."""
    from trialkit.loaders.target import load_target

    source = config.get("source") or {}
    model = source.get("model")
    if target is not None:
        return load_target(target, model=model)
    if not source.get("target"):
        raise RegradeError(
            f"run {run_id!r} does not record its suite's source (it was stored by an older "
            "trialkit, or run from Python): give the suite with --suite TARGET"
        )
    cwd = source.get("cwd") or "."
    if not Path(cwd).is_dir():
        raise RegradeError(
            f"run {run_id!r} loaded its suite {source['target']!r} in {cwd}, which no longer "
            "exists: give the suite with --suite TARGET"
        )
    with contextlib.chdir(cwd):
        return load_target(str(source["target"]), model=model)


async def regrade(
    store: Store,
    run_id: str,
    suite: Suite,
    *,
    settings: RunSettings | None = None,
    graders: Sequence[str] = (),
) -> Regrade:
    """Regrade the stored run `run_id` with `suite`'s current graders into a new run.

    `settings`: the cassette, judge model, concurrency, offline and name of the regrade (its
    judge model defaults to the stored run's `--judge-model`). `graders`: regrade only the
    graders of these names (a full name such as `contains('paris')`, or a kind such as
    `contains` for all of them) and keep the trial's other scores as stored. Raises
    `RegradeError` (nothing stored) for a task of the run the suite no longer has, a grader
    name no task has, or another suite than the run's.
    """
    from trialkit.run.runner import Runner, new_run_id
    from trialkit.store.resume import load_run

    settings = settings or RunSettings()
    old_run, suite_info, plans = await anyio.to_thread.run_sync(load_run, store, run_id)
    if suite_info.id != suite.id:
        raise RegradeError(
            f"run {run_id!r} ran suite {suite_info.id!r}, not {suite.id!r}: "
            "regrade it with the suite it ran"
        )
    old = old_run.config
    if settings.judge_model is None and old.get("judge_model"):
        settings = settings.replace(judge_model=old["judge_model"])
    if settings.model is None and old.get("model"):
        settings = settings.replace(model=old["model"])
    planner = Runner(settings.replace(task_ids=(), tags=(), trials=None, adaptive=None))
    planned = {p.task.id: p for p in planner.plan(suite)}
    missing = [plan.id for plan in plans if plan.id not in planned]
    if missing:
        raise RegradeError(
            f"run {run_id!r} has tasks suite {suite.id!r} no longer has: {', '.join(missing)}; "
            "nothing was regraded"
        )
    items = {plan.id: planned[plan.id] for plan in plans}
    chosen = _Selection(graders)
    chosen.check(suite.id, [g for item in items.values() for g in item.graders])
    model_settings = planner.run_settings(suite)
    check_models(
        f"suite {suite.id!r}",
        (
            m
            for item in items.values()
            for m in judge_models(_regraded(item.graders, chosen), model_settings.judge_model)
        ),
        model_settings.cassette,
    )

    config = {
        key: value
        for key, value in old.items()
        if key not in ("stop_reason", "resumed", "judge_controls", "ray_actors", CONSISTENCY_KEY)
    }
    config.update(
        regrade_of=run_id,
        graders=list(graders) or None,
        judge_model=model_settings.judge_model,
        concurrency=settings.concurrency,
        cache=_cache_config(model_settings),
    )
    if suite.source is not None:
        config["source"] = dataclasses.asdict(suite.source)
    run = RunInfo(
        id=new_run_id(),
        name=settings.name,
        started_at=datetime.now(UTC),
        status="running",
        config=config,
    )
    labels = await anyio.to_thread.run_sync(store.labels, run_id)
    await anyio.to_thread.run_sync(store.create_run, run, suite_info, plans)
    changes = await _regrade_trials(
        store, run, run_id, items, chosen, model_settings, settings.concurrency, suite.id, labels
    )
    report = await anyio.to_thread.run_sync(store.load_report, run.id)
    return Regrade(report=report, regrade_of=run_id, changes=changes)


def regrade_sync(
    store: Store,
    run_id: str,
    suite: Suite,
    *,
    settings: RunSettings | None = None,
    graders: Sequence[str] = (),
) -> Regrade:
    """`regrade` from synchronous code (on a loop of its own when one is running already)."""
    return run_blocking(
        functools.partial(regrade, store, run_id, suite, settings=settings, graders=graders)
    )


class _Selection:
    """The graders `--grader` names: all of them when it names none."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    @property
    def everything(self) -> bool:
        return not self.names

    def __call__(self, name: str) -> bool:
        if self.everything:
            return True
        return name in self.names or _kind(name) in self.names

    def check(self, suite_id: str, graders: Iterable[Grader]) -> None:
        known = sorted({g.name for g in graders})
        kinds = {_kind(name) for name in known}
        unknown = [n for n in self.names if n not in known and n not in kinds]
        if unknown:
            shown = ", ".join(known) if known else "none"
            raise RegradeError(
                f"suite {suite_id!r} has no grader named {', '.join(map(repr, unknown))}; "
                f"its graders: {shown}"
            )


def _regraded(graders: Sequence[Grader], chosen: _Selection) -> list[Grader]:
    return [g for g in graders if chosen(g.name)]


async def _regrade_trials(
    store: Store,
    run: RunInfo,
    old_id: str,
    items: dict[str, PlannedTask],
    chosen: _Selection,
    settings: ModelSettings,
    concurrency: int,
    suite_id: str,
    labels: list[Label],
) -> VerdictChanges:
    """Stream the old run's trials through `concurrency` graders into the new run, then copy
    the old run's labels to it."""
    labeled: dict[tuple[str, int], set[str]] = {}
    for label in labels:
        labeled.setdefault((label.task_id, label.trial), set()).add(label.grader)
    threads = anyio.to_thread.current_default_thread_limiter()
    threads.total_tokens = max(threads.total_tokens, concurrency)
    changes = VerdictChanges()
    consistency = ConsistencyTally()
    writer = TrialWriter(store)
    if settings.capture or settings.offline:
        from trialkit.capture.hook import install

        install(offline=settings.offline)
    try:
        with use_settings(settings):
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.loop)
                async with _stream(store, old_id, concurrency) as trials:

                    async def worker() -> None:
                        async for old in trials:
                            item = items.get(old.task_id)
                            reviewed = labeled.get((old.task_id, old.index), set())
                            new = await regrade_trial(old, item, run.id, chosen, reviewed)
                            changes.add(old.verdict, new.verdict)
                            consistency.add_trial(new)
                            await writer.put(new)

                    async with anyio.create_task_group() as workers:
                        for _ in range(concurrency):
                            workers.start_soon(worker)
                writer.close()
        if labels:
            copies = [label.model_copy(update={"run_id": run.id}) for label in labels]
            await anyio.to_thread.run_sync(store.save_labels, copies)
        run.status = "completed"
    except BaseException:
        run.status = "interrupted"
        raise
    finally:
        if settings.run_calls:
            run.config["judge_controls"] = run_calls_summary(settings.run_calls)
        if consistency:
            run.config[CONSISTENCY_KEY] = consistency_config(consistency.results())
        run.finished_at = datetime.now(UTC)
        with anyio.CancelScope(shield=True):
            writer.flush_now()
            if retried_of(run.config):  # the retried trials' verdicts and rates, regraded
                from trialkit.store.resume import stored_verdicts

                verdicts = await anyio.to_thread.run_sync(stored_verdicts, store, run.id)
                run.config[RETRIED_KEY] = record_retries(retried_of(run.config), set(), verdicts)
            await anyio.to_thread.run_sync(store.finish_run, run)
        if settings.cassette is not None:
            settings.cassette.write_manifest(suite_id, complete=False)
    return changes


@contextlib.asynccontextmanager
async def _stream(store: Store, run_id: str, buffer: int) -> AsyncIterator[Any]:
    """The stored trials of `run_id`, read in one worker thread (the store's batches), at most
    `buffer` of them waiting: a big run never sits in memory."""
    send, receive = anyio.create_memory_object_stream[Trial](max_buffer_size=buffer)
    trials = await anyio.to_thread.run_sync(store.iter_trials, run_id)

    def read() -> None:
        try:
            for trial in trials:
                anyio.from_thread.run(send.send, trial)
        finally:
            close = getattr(trials, "close", None)  # the read transaction ends in its thread
            if close is not None:
                close()

    async def produce() -> None:
        try:
            await anyio.to_thread.run_sync(read)
        except anyio.BrokenResourceError:  # the graders stopped early
            pass
        finally:
            send.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(produce)
        with receive:
            yield receive


def _cache_config(settings: ModelSettings) -> dict[str, Any]:
    """The regrade's cassette, as a run records its own."""
    network = {"capture": settings.capture, **offline_config(settings.offline)}
    cassette = settings.cassette
    if cassette is None:
        return {"mode": "live", **network}
    return {"mode": cassette.mode.value, "folder": str(cassette.root), **network}


def _regradable(trial: Trial) -> bool:
    """Completed, or broke while its graders ran (the agent's part was over)."""
    if trial.status is TrialStatus.COMPLETED:
        return True
    return (
        trial.status in _REGRADED_STATUSES
        and trial.error is not None
        and trial.error.phase == "grading"
    )


async def regrade_trial(
    old: Trial,
    item: PlannedTask | None,
    run_id: str,
    chosen: _Selection,
    reviewed: set[str] | frozenset[str] = frozenset(),
) -> Trial:
    """`old` graded again by `item`'s graders (those `chosen`), as a trial of run `run_id`.

    The stored scores of the graders in `reviewed` (labeled by a reviewer) and of `human()`
    graders are kept: a regrade never redoes a human's judgement. `old` is left as it was; the
    new trial shares the parts of it that a regrade does not change (outcome, messages)."""
    copied = old.model_copy(update={"run_id": run_id})
    if item is None or not _regradable(old):
        return copied  # its task is not planned (a stray row) or it never completed
    humans = {g.name for g in item.graders if isinstance(g, human)}
    kept = {s.name for s in old.scores if s.name in reviewed or s.name in humans}
    graders = [g for g in _regraded(item.graders, chosen) if g.name not in kept]
    if not graders and not chosen.everything:
        return copied
    # Grader calls are not attributed to a grader: a full regrade replaces them all, a
    # partial one keeps the stored graders' calls beside the new ones.
    calls = old.transcript.model_calls
    transcript = old.transcript.model_copy(
        update={"model_calls": [c for c in calls if c.role != "grader"], "grader_usage": Usage()}
        if chosen.everything
        else {"model_calls": list(calls)}
    )
    recorder = TranscriptRecorder(old.task_id, old.index)
    recorder.transcript = transcript
    recorder.turn = max(len(transcript.turns) - 1, 0)
    ctx = GradeContext(
        task=item.task, trial_index=old.index, transcript=transcript, outcome=copied.outcome
    )
    token = activate(recorder)
    try:
        with anyio.move_on_after(item.timeout) as scope, calls_as("grader"):
            fresh = await _grade(graders, ctx, expect=item.task.expect)
    finally:
        flush_held(recorder)
        recorder.closed = True
        deactivate(token)
    status, error = TrialStatus.COMPLETED, None
    if scope.cancelled_caught:
        status = TrialStatus.TIMEOUT
        error = ErrorInfo(
            type="Timeout",
            message=f"regrading exceeded the task's {item.timeout:g} s timeout",
            phase="grading",
        )
        fresh = []
    elif recorder.fatal is not None:  # a grader's own SDK call could not be answered
        status = TrialStatus.ERROR
        error = ErrorInfo.from_exception(recorder.fatal, phase="grading")
    if chosen.everything:
        scores = fresh + [s for s in old.scores if s.name in kept]
    else:
        scores = _merge(old.scores, fresh, chosen, kept)
    return copied.model_copy(
        update={
            "status": status,
            "error": error,
            "scores": scores,
            "verdict": trial_verdict(status, scores),
            "transcript": transcript,
            "grader_usage": transcript.grader_usage,
            "cost_usd": _cost(transcript),
            "grader_cost_usd": _grader_cost(transcript.model_calls),
        }
    )


def _merge(
    stored: list[Score], fresh: list[Score], chosen: _Selection, kept: set[str]
) -> list[Score]:
    """The stored scores, with each of a chosen grader replaced in its place by the new score
    of that name, else of that kind (`contains('paris')` by `contains('lyon')`); the implicit
    `agent_completed` check and the `kept` scores stay as stored, new scores left over go last."""
    waiting = [s for s in fresh if s.name != _COMPLETED]
    merged = []
    for score in stored:
        if score.name == _COMPLETED or score.name in kept or not chosen(score.name):
            merged.append(score)
            continue
        same = next((s for s in waiting if s.name == score.name), None)
        if same is None:
            same = next((s for s in waiting if _kind(s.name) == _kind(score.name)), None)
        if same is not None:
            waiting.remove(same)
            merged.append(same)
    return merged + waiting


def _kind(name: str) -> str:
    """A grader's kind: its name up to the arguments (`contains` of `contains('paris')`)."""
    return name.split("(", 1)[0]
