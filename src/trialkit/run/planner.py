"""What a run of a suite will do, before any trial runs: the tasks with their graders, trial
counts and timeouts, the harness and the models it calls (checked), the settings of the model
layer, and what the run records of its configuration.

The `Runner` is a `Planner` that also runs the trials; a worker process or a Ray actor
(`trialkit.executors`) needs only the planner to run the trials it is sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, TypeAlias

from trialkit.capture.scope import offline_config
from trialkit.environments.base import NO_ENVIRONMENT
from trialkit.graders.base import as_grader
from trialkit.graders.human import with_review
from trialkit.graders.text import agent_failed
from trialkit.harness.base import Harness
from trialkit.harness.chat import ChatHarness
from trialkit.harness.function import as_harness
from trialkit.models.base import Model
from trialkit.models.context import ModelSettings
from trialkit.models.retry import RetryPolicy
from trialkit.run.adaptive import AdaptiveQueue
from trialkit.run.preflight import check_executor, check_models, judge_models
from trialkit.run.settings import RunSettings
from trialkit.run.trial import PlannedTask, TrialRunner, model_name
from trialkit.score import Verdict
from trialkit.task import Suite, SuiteError, Task

Work: TypeAlias = "list[tuple[PlannedTask, int]] | AdaptiveQueue[PlannedTask]"
"""The trials of a run still to run, as (task, trial index): all known at the start, or
chosen as trials finish (adaptive trials)."""


class EmptySelection(SuiteError):
    """The task selection is empty: nothing would run (exit 2, never a green run)."""


class Planner:
    """A run's settings and what follows from them for a suite. Its `RunSettings` override
    the suite's options (like the CLI flags do).

    `workers` > 1 runs the trials in that many child processes (see `trialkit.executors`);
    `executor="ray"` runs them in Ray actors (`workers` of them; by default one per CPU of the
    cluster). `min_pass_rate` and `fail_on_error` are the thresholds of the CI gate
    (`Report.gate()`), kept with the run so that every report of it states the same verdict.
    """

    def __init__(
        self,
        settings: RunSettings | None = None,
        *,
        harness: Any = None,
        **options: Any,
    ) -> None:
        """`settings` (or the same fields as keyword `options`; both: the options win);
        `harness` runs the tasks instead of the suite's."""
        if settings is None:
            settings = RunSettings(**options)
        elif options:
            settings = settings.replace(**options)
        if settings.elsewhere and harness is not None:
            raise ValueError(
                "a harness given to the Runner cannot be sent to worker processes or Ray "
                "actors: put it on the suite, or run in this process"
            )
        self.options = settings
        """The settings this planner (or runner) was made with."""
        self.concurrency = settings.concurrency
        self.trials = settings.trials
        self.timeout = settings.timeout
        self.task_ids = settings.task_ids
        self.tags = settings.tags
        self.name = settings.name
        self.harness_override = harness
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
            **({} if self.adaptive is None else {"adaptive": self.adaptive.to_config()}),
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

    def _schedule(
        self, suite: Suite, planned: list[PlannedTask], done: dict[tuple[str, int], Verdict]
    ) -> Work:
        """The trials to run: a fixed list, or an adaptive queue seeded with the `done` ones (of
        a resumed run)."""
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
