"""Exporters receive a run's trials as they finish, or a stored run afterwards."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trialkit.report import RunInfo, SuiteInfo
    from trialkit.trial import Trial


class Exporter:
    """Hooks the runner calls on the event loop's thread; keep them quick (buffer, don't block).

    `trialkit export` calls the same hooks for a stored run, so one exporter serves both.
    """

    def on_run_start(self, run: RunInfo, suite: SuiteInfo) -> None:
        return None

    def on_trial(self, trial: Trial) -> None:
        return None

    def on_run_end(self, run: RunInfo) -> None:
        """Flush and close; called once, also after an interruption."""
        return None
