"""One suite against several models in one go (`trialkit run ... --models A,B,C`).

Each model gets its own run in the store (named after the model), so `trialkit compare` and
`trialkit health` see ordinary runs. The runs go at the same time, sharing the concurrency, so
their trials interleave: a provider that slows down or drifts during the evaluation affects
every model alike instead of whichever happened to run last.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from trialkit.report import Report
from trialkit.run.progress import Progress
from trialkit.run.runner import Runner
from trialkit.run.settings import RunSettings
from trialkit.task import Suite
from trialkit.trial import Trial

if TYPE_CHECKING:
    from trialkit.store import Store

__all__ = ["check_models_runs", "run_models"]


class _Shared(Progress):
    """Hands one run's progress events to the progress of all the runs."""

    def __init__(self, target: Progress) -> None:
        self.target = target

    def start(self, total: int) -> None:
        """`run_models` starts the shared progress with every run's total."""

    def advance(self, trial: Trial) -> None:
        self.target.advance(trial)

    def stop(self) -> None:
        """The runs stop together; `run_models` stops the shared progress."""


async def run_models(
    suite: Suite,
    models: Sequence[str],
    *,
    settings: RunSettings | None = None,
    store: Store | str | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> list[Report]:
    """Run `suite` once per model in `models`, all at once; the reports in the same order.

    Each run uses the model as the suite's model (a task that names its own model keeps it) and
    gets `concurrency / len(models)` workers (at least one). Runs are named `name@model`, or
    `suite-id@model`. `settings` (or its fields as `options`) are the other options of each
    run (trials, cassette, ...). Judges that name no model use `judge_model`, else the suite's
    own model when it names one by id; give one so the same judge grades every model.
    """
    runners = check_models_runs(
        suite, models, settings=settings, store=store, progress=progress, **options
    )
    reports: list[Report | None] = [None] * len(models)

    async def one(i: int) -> None:
        reports[i] = await runners[i].run(_for_model(suite, models[i]))

    if progress is not None:
        progress.start(sum(r.most_trials(suite) for r in runners))
    try:
        async with anyio.create_task_group() as tg:
            for i in range(len(models)):
                tg.start_soon(one, i)
    finally:
        if progress is not None:
            progress.stop()
    return [r for r in reports if r is not None]


def check_models_runs(
    suite: Suite,
    models: Sequence[str],
    *,
    settings: RunSettings | None = None,
    store: Store | str | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> list[Runner]:
    """The runners of `run_models`, each checked (its selection, its models, its executor):
    a run that cannot work fails here, before any run starts."""
    if len(models) < 2:
        raise ValueError(f"--models needs at least two models, got {len(models)}")
    if len(set(models)) != len(models):
        raise ValueError("--models: a model is listed twice")
    settings = settings or RunSettings()
    if options:
        settings = settings.replace(**options)
    share = max(1, math.ceil(settings.concurrency / len(models)))
    if settings.judge_model is None and isinstance(suite.model, str):
        # one judge for every run, not each model itself
        settings = settings.replace(judge_model=suite.model)
    runners = [
        Runner(
            settings.replace(
                concurrency=share, name=f"{settings.name or suite.id}@{model}", model=model
            ),
            store=store,
            progress=_Shared(progress) if progress is not None else None,
        )
        for model in models
    ]
    for runner, model in zip(runners, models, strict=True):
        runner.check(_for_model(suite, model))
    return runners


def _for_model(suite: Suite, model: str) -> Suite:
    return dataclasses.replace(suite, model=model)
