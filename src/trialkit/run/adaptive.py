"""Adaptive trials: sample a task only while its verdict or its estimate is still undecided.

A fixed trial count spends as much on a task that failed at its first trial as on one whose
pass rate is still uncertain. With `Adaptive(max_trials=20, precision=0.2)` (CLI:
`--trials auto --max-trials 20 --precision 0.2`) each task stops as soon as one of these holds
(its cap is `max_trials`, or by default its own trial count — the suite's or the task's — so
an adaptive run never takes more trials than the fixed one would):

- a **regression** task failed a trial: its verdict is decided (fail) at the first failure.
  Otherwise it runs to its cap, so its verdict is exactly the one a fixed run of that many
  trials would give — for fewer trials whenever a task fails;
- a **capability** task's pass rate has a 95% Wilson interval at most `precision` wide (over
  at least `min_trials` decided trials): the estimate is as sharp as asked. It does not stop
  at its first pass: its verdict is then known, but its pass rate, pass^k and flakiness are
  what a capability suite is for;
- it has used its cap (errors and unknowns included, so a task that keeps erroring stops
  too);
- with a baseline (`baseline`: each task's passed and decided trials in the baseline run;
  CLI: `--trials auto --baseline FILE|RUN`), after `min_trials` decided trials: **more trials
  would not change its comparison with the baseline**. The comparison is the task's own
  exact test against its baseline trials (Fisher's, two-sided, at `alpha`: the test compare
  names changed tasks with, before the correction for many tasks): whether it changed, and
  which way. The task stops when every outcome of its remaining trials (any number of them
  decided, any of those passing) gives the same answer as now. A task the baseline did not
  run, or decided no trial of, is not stopped by this rule.

Each task's report says how many trials it used and why it stopped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import anyio

from trialkit.analysis.stats import Table, fisher_exact
from trialkit.metrics import wilson_interval
from trialkit.score import Verdict
from trialkit.task import SuiteError, SuiteKind, trials_problem

T = TypeVar("T")

FIRST_FAILURE = "a regression task fails at its first failed trial"
NARROW = "the 95% interval is"
CAP = "it reached the most trials allowed"
SETTLED = "more trials would not change its comparison with the baseline"


@dataclass(frozen=True)
class Adaptive:
    """How adaptive trials stop; see the module docs."""

    max_trials: int | None = None
    """The most trials any task gets; `None`: each task's own trial count."""
    precision: float = 0.2
    """Stop once the 95% interval of the pass rate is at most this wide."""
    min_trials: int = 3
    """Decided trials needed before the interval (or the baseline) may stop a task."""
    baseline: Mapping[str, tuple[int, int]] | None = None
    """Each task's (passed, decided) trials in the baseline run: a task stops once more
    trials would not change its comparison with them."""
    alpha: float = 0.05
    """The significance level of that comparison."""

    def __post_init__(self) -> None:
        if self.max_trials is not None and (problem := trials_problem(self.max_trials)):
            raise SuiteError(f"max_trials: {problem}")
        if not 0 < self.precision <= 1:
            raise ValueError(f"precision must be within (0, 1], got {self.precision}")
        if self.min_trials < 1:
            raise ValueError(f"min_trials must be >= 1, got {self.min_trials}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be within (0, 1), got {self.alpha}")

    def to_config(self) -> dict[str, Any]:
        """The policy as a run's config keeps it (`RunInfo.config["adaptive"]`), so a resumed
        run stops its tasks by the same rules; `stopped` gets each task's reason as it stops."""
        baseline = (
            {}
            if self.baseline is None
            else {"baseline": {k: list(v) for k, v in self.baseline.items()}, "alpha": self.alpha}
        )
        return {
            "max_trials": self.max_trials,
            "precision": self.precision,
            "min_trials": self.min_trials,
            **baseline,
            "stopped": {},
        }

    @classmethod
    def from_config(cls, kept: Mapping[str, Any]) -> Adaptive:
        """The policy a run's config kept (`to_config`)."""
        baseline = kept.get("baseline")
        return cls(
            max_trials=kept.get("max_trials"),
            precision=kept["precision"],
            min_trials=kept["min_trials"],
            baseline={str(k): (int(v[0]), int(v[1])) for k, v in baseline.items()}
            if isinstance(baseline, dict)
            else None,
            alpha=kept.get("alpha", 0.05),
        )

    def stop_reason(
        self,
        kind: SuiteKind,
        passed: int,
        failed: int,
        other: int,
        cap: int,
        task_id: str | None = None,
    ) -> str | None:
        """Why a task with these finished trials needs no more, or `None` if it does.

        `other` counts finished trials that decided nothing (errors, unknowns); `cap` is the
        most trials the task may get; `task_id` finds its baseline trials."""
        decided = passed + failed
        base = None if self.baseline is None or task_id is None else self.baseline.get(task_id)
        if base is not None and base[1] and decided >= self.min_trials:
            remaining = max(0, cap - decided - other)
            if settled(base, passed, decided, remaining, self.alpha):
                return f"{SETTLED} ({base[0]}/{base[1]} there, {passed}/{decided} here)"
        if kind is SuiteKind.REGRESSION:
            if failed:
                return FIRST_FAILURE
        elif decided >= self.min_trials:
            interval = wilson_interval(passed, decided)
            assert interval is not None
            width = interval[1] - interval[0]
            if width <= self.precision:
                return f"{NARROW} {width:.2f} wide (precision {self.precision:g})"
        if decided + other >= cap:
            return f"{CAP} ({cap})"
        return None


def change(base: tuple[int, int], passed: int, decided: int, alpha: float) -> int:
    """The task's comparison with its baseline trials: -1 worse, +1 better (Fisher's exact
    test, two-sided, under `alpha`), 0 no change shown."""
    if not decided:
        return 0
    table = Table(base[0], base[1], passed, decided)
    if not table.informative or fisher_exact(table) >= alpha:
        return 0
    return 1 if passed * base[1] > base[0] * decided else -1


def settled(base: tuple[int, int], passed: int, decided: int, remaining: int, alpha: float) -> bool:
    """True when no outcome of `remaining` more trials (any of them decided, any of those
    passing) changes the task's comparison with its baseline trials."""
    now = change(base, passed, decided, alpha)
    return all(
        change(base, passed + k, decided + d, alpha) == now
        for d in range(1, remaining + 1)
        for k in range(d + 1)
    )


@dataclass
class _Tally:
    kind: SuiteKind
    cap: int
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
    items: Sequence[tuple[str, SuiteKind, int, T]]
    """(task id, the kind that decides its verdict, its own trial count, what the worker
    runs); the cap of a task is the policy's `max_trials`, else its own trial count."""
    workers: int
    tallies: dict[str, _Tally] = field(init=False)
    _changed: anyio.Event = field(init=False)
    _order: list[str] = field(init=False)

    def __post_init__(self) -> None:
        cap = self.policy.max_trials
        self.tallies = {task_id: _Tally(kind, cap or own) for task_id, kind, own, _ in self.items}
        self._payload = {task_id: payload for task_id, _, _, payload in self.items}
        self._order = [task_id for task_id, _, _, _ in self.items]
        self._changed = anyio.Event()

    def seed(self, task_id: str, index: int, verdict: Verdict) -> None:
        """Count a trial that already ran (when resuming a run)."""
        tally = self.tallies[task_id]
        self._count(tally, verdict)
        tally.next_index = max(tally.next_index, index + 1)
        tally.stopped = self._stop_reason(task_id, tally)

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
            tally.stopped = self._stop_reason(task_id, tally)
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
        return tally.stopped is None and tally.started < tally.cap

    def remaining(self) -> int:
        """The most trials still to run."""
        return sum(max(0, t.cap - t.started) for t in self.tallies.values() if not t.stopped)

    def _stop_reason(self, task_id: str, tally: _Tally) -> str | None:
        return self.policy.stop_reason(
            tally.kind, tally.passed, tally.failed, tally.other, tally.cap, task_id
        )

    @staticmethod
    def _count(tally: _Tally, verdict: Verdict) -> None:
        if verdict is Verdict.PASS:
            tally.passed += 1
        elif verdict is Verdict.FAIL:
            tally.failed += 1
        else:
            tally.other += 1
