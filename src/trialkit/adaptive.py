"""Adaptive trials: sample a task only while its verdict or its estimate is still undecided.

A fixed trial count spends as much on a task that failed at its first trial as on one whose
pass rate is still uncertain. With `Adaptive(max_trials=20, precision=0.2)` (CLI:
`--trials auto --max-trials 20 --precision 0.2`) each task stops as soon as one of these holds:

- a **regression** task failed a trial: its verdict is decided (fail) at the first failure;
- the pass rate's 95% Wilson interval over its decided trials is at most `precision` wide
  (and at least `min_trials` were decided): the estimate is as sharp as asked;
- it has used `max_trials` trials (errors and unknowns included, so a task that keeps
  erroring stops too).

A capability task does not stop at its first pass: its verdict is then known, but its pass
rate, pass^k and flakiness are what a capability suite is for, so it samples until the
interval is narrow enough. Each task's report says how many trials it used and why it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

from trialkit.metrics import wilson_interval
from trialkit.score import Verdict
from trialkit.task import SuiteKind

T = TypeVar("T")


@dataclass(frozen=True)
class Adaptive:
    """How adaptive trials stop; see the module docs."""

    max_trials: int = 20
    """The most trials any task gets."""
    precision: float = 0.2
    """Stop once the 95% interval of the pass rate is at most this wide."""
    min_trials: int = 3
    """Decided trials needed before the interval may stop a task."""

    def __post_init__(self) -> None:
        if self.max_trials < 1:
            raise ValueError(f"max_trials must be >= 1, got {self.max_trials}")
        if not 0 < self.precision <= 1:
            raise ValueError(f"precision must be within (0, 1], got {self.precision}")
        if self.min_trials < 1:
            raise ValueError(f"min_trials must be >= 1, got {self.min_trials}")

    def stop_reason(self, kind: SuiteKind, passed: int, failed: int, other: int) -> str | None:
        """Why a task with these finished trials needs no more, or `None` if it does.

        `other` counts finished trials that decided nothing (errors, unknowns)."""
        if kind is SuiteKind.REGRESSION and failed:
            return "a regression task fails at its first failed trial"
        decided = passed + failed
        if decided >= self.min_trials:
            interval = wilson_interval(passed, decided)
            assert interval is not None
            width = interval[1] - interval[0]
            if width <= self.precision:
                return f"the 95% interval is {width:.2f} wide (precision {self.precision:g})"
        if decided + other >= self.max_trials:
            return f"it reached the most trials allowed ({self.max_trials})"
        return None


@dataclass
class _Tally:
    kind: SuiteKind
    passed: int = 0
    failed: int = 0
    other: int = 0
    """Errors and unknowns."""
    running: int = 0
    next_index: int = 0
    stopped: str | None = None

    @property
    def started(self) -> int:
        return self.passed + self.failed + self.other + self.running


@dataclass
class AdaptiveQueue(Generic[T]):
    """Hands out (task, trial index) pairs while tasks are undecided.

    Workers call `next()` for work (it waits while trials in flight may still decide whether
    more are needed, and returns `None` when nothing is left) and `finished()` with each result.
    At most `ceil(workers / undecided tasks)` trials of one task run at once, so idle workers
    spread over the tasks instead of overshooting one task's need.
    """

    policy: Adaptive
    items: Sequence[tuple[str, SuiteKind, T]]
    """(task id, the kind that decides its verdict, what the worker runs)."""
    workers: int
    tallies: dict[str, _Tally] = field(init=False)
    _changed: anyio.Event = field(init=False)
    _order: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.tallies = {task_id: _Tally(kind) for task_id, kind, _ in self.items}
        self._payload = {task_id: payload for task_id, _, payload in self.items}
        self._order = [task_id for task_id, _, _ in self.items]
        self._changed = anyio.Event()

    def seed(self, task_id: str, index: int, verdict: Verdict) -> None:
        """Count a trial that already ran (when resuming a run)."""
        tally = self.tallies[task_id]
        self._count(tally, verdict)
        tally.next_index = max(tally.next_index, index + 1)
        tally.stopped = self.policy.stop_reason(tally.kind, tally.passed, tally.failed, tally.other)

    async def next(self) -> tuple[T, int] | None:
        while True:
            picked = self._pick()
            if picked is not None:
                return picked
            if not any(t.running for t in self.tallies.values()):
                return None
            changed = self._changed
            await changed.wait()

    def finished(self, task_id: str, verdict: Verdict) -> None:
        tally = self.tallies[task_id]
        tally.running -= 1
        self._count(tally, verdict)
        if tally.stopped is None:
            tally.stopped = self.policy.stop_reason(
                tally.kind, tally.passed, tally.failed, tally.other
            )
        self._changed.set()
        self._changed = anyio.Event()

    def stop_reasons(self) -> dict[str, str]:
        """Why each task stopped (tasks stopped early by a budget or Ctrl-C have none)."""
        return {task_id: t.stopped for task_id, t in self.tallies.items() if t.stopped}

    def _pick(self) -> tuple[T, int] | None:
        open_tasks = [task_id for task_id in self._order if self._needs_more(task_id)]
        if not open_tasks:
            return None
        share = math.ceil(self.workers / len(open_tasks))
        candidates = [t for t in open_tasks if self.tallies[t].running < share]
        if not candidates:
            return None
        task_id = min(candidates, key=lambda t: self.tallies[t].started)
        tally = self.tallies[task_id]
        tally.running += 1
        index = tally.next_index
        tally.next_index += 1
        return self._payload[task_id], index

    def _needs_more(self, task_id: str) -> bool:
        tally = self.tallies[task_id]
        return tally.stopped is None and tally.started < self.policy.max_trials

    @staticmethod
    def _count(tally: _Tally, verdict: Verdict) -> None:
        if verdict is Verdict.PASS:
            tally.passed += 1
        elif verdict is Verdict.FAIL:
            tally.failed += 1
        else:
            tally.other += 1
