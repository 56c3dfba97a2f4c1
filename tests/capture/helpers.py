"""Running a suite and keeping its trials, for the capture tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from trialkit import Suite
from trialkit.exporters.base import Exporter
from trialkit.report import Report
from trialkit.run.runner import Runner
from trialkit.trial import Trial

KEY = "sk-test-capture-0123456789abcdefghij"
"""An API key that looks real, so a scan for it finds any copy that leaked."""


class Collect(Exporter):
    """Keeps every trial of a run, sorted by (task, index) at the end."""

    def __init__(self) -> None:
        self.trials: list[Trial] = []

    def on_trial(self, trial: Trial) -> None:
        self.trials.append(trial)


def run_trials(
    suite: Suite, *, after: Callable[[], Awaitable[Any]] | None = None, **options: Any
) -> tuple[Report, list[Trial], Runner]:
    """Run `suite` with `Runner(**options)`; its report, its trials in order, the runner.
    `after` runs on the same event loop once the run is over (to close shared clients)."""
    collect = Collect()
    runner = Runner(exporters=[collect], **options)

    async def main() -> Report:
        try:
            return await runner.run(suite)
        finally:
            if after is not None:
                await after()

    report = anyio.run(main)
    trials = sorted(collect.trials, key=lambda t: (t.task_id, t.index))
    return report, trials, runner


def errors(trials: list[Trial]) -> list[str]:
    return [f"{t.task_id}#{t.index}: {t.error.message}" for t in trials if t.error is not None]
