"""Environments prepare the world for a trial, capture what changed, and clean up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trialkit.outcome import Outcome
    from trialkit.score import Verdict
    from trialkit.task import Task


class Environment:
    """The protocol every environment follows; the base class does nothing at each step.

    1. `setup(task, trial_index)` makes the world for one trial and returns a handle to it
       (the "world"), which the harness and the graders receive.
    2. `capture(world, outcome)` adds to the outcome what the trial changed: state facts, a
       workspace diff, artifacts.
    3. `teardown(world)` cleans up; it runs even when the trial errored or timed out.

    An exception in `setup` or `capture` makes the trial an error, never a fail.
    """

    name: str = "none"

    async def setup(self, task: Task, trial_index: int) -> Any:
        return None

    async def capture(self, world: Any, outcome: Outcome) -> None:
        return None

    def keep_for(self, world: Any, verdict: Verdict, *, run_id: str | None = None) -> bool:
        """Told the trial's verdict just before `teardown`; returns whether the world will be
        kept for inspection (a workspace of a failing trial, say). Keeps nothing by default."""
        return False

    async def teardown(self, world: Any) -> None:
        return None


NO_ENVIRONMENT = Environment()
