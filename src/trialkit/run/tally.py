"""What a run's report needs of its trials, kept as running figures while the run goes.

A run of a million trials cannot keep a result per trial until it ends. A `TaskTally` takes
each finished trial (or its `TrialResult`) and keeps only what the task's report is made of: counts
by verdict, token totals, exact running sums of scores and costs (Shewchuk's partials, so the
totals are `math.fsum`'s to the last bit, in any order), the span of wall time, each trial's
duration (8 bytes, for exact latency percentiles), and the results the report lists (every
one while there are at most `max_results`, then the first non-passing ones). Memory is then
a few bytes per trial and a bounded amount per task, however many trials a task has.

`build_report` goes through the same tallies, so a report made while the run goes and one made
from a list of results (or by the store, which does the same sums in SQL) agree exactly.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from trialkit import metrics
from trialkit._record import share_field_sets
from trialkit.report_records import Measures, TaskTotals, TrialResult
from trialkit.score import Verdict
from trialkit.transcript import Usage

if TYPE_CHECKING:
    from trialkit.trial import Trial


class ExactSum:
    """A sum of floats, correctly rounded whatever the order they came in (`math.fsum` of
    them all), from a handful of non-overlapping partials."""

    __slots__ = ("count", "partials", "rest")

    def __init__(self) -> None:
        self.partials: list[float] = []
        """Non-overlapping, smallest first: their exact sum is that of the values added."""
        self.rest: list[float] = []
        """Values too large (or not finite) to add without overflowing, kept as they came:
        `math.fsum` of them and the partials treats them as it would have."""
        self.count = 0

    def add(self, x: float) -> None:
        self.count += 1
        if not abs(x) < _HUGE:  # no run's scores or costs: kept aside, so nothing overflows
            self.rest.append(x)
            return
        partials = self.partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                partials[i] = low
                i += 1
            x = high
        partials[i:] = [x]

    def total(self) -> float:
        return math.fsum([*self.partials, *self.rest])


_HUGE = 2.0**1000
"""Under it, a sum of fewer than 2**23 values cannot overflow: it stays under 2**1023."""


class TaskTally:
    """One task's trials, counted and summed as they finish (see the module's docstring)."""

    __slots__ = (
        "cost",
        "cost_known",
        "durations",
        "first_start",
        "grader_cost",
        "grader_cost_known",
        "grader_usage",
        "last_end",
        "listed",
        "max_results",
        "pending",
        "scores",
        "starts_known",
        "usage",
        "verdicts",
    )

    def __init__(self, max_results: int) -> None:
        self.max_results = max_results
        self.verdicts = [0, 0, 0, 0]  # pass, fail, error, unknown
        self.usage = _NONE  # shared until a trial adds tokens: most code-graded tasks add none
        self.grader_usage = _NONE
        self.cost = ExactSum()
        self.grader_cost = ExactSum()
        self.cost_known = True
        self.grader_cost_known = True
        self.scores = ExactSum()
        self.durations = array("d")
        self.pending = 0
        self.first_start: datetime | None = None
        self.last_end: datetime | None = None
        self.starts_known = True
        self.listed: list[tuple[int, bool, TrialResult]] = []
        """(trial, passed, result), in trial order: all results while they fit
        in `max_results`, then the first non-passing ones."""

    @property
    def trials(self) -> int:
        return len(self.durations)

    def add(self, result: TrialResult) -> None:
        self._count(result, result.trial, lambda: result)

    def add_trial(self, trial: Trial) -> None:
        """`add` of a finished trial, whose `TrialResult` is made only if the report lists it
        (most trials of a big task are counted, not listed)."""
        self._count(trial, trial.index, lambda: TrialResult.from_trial(trial))

    def _count(
        self, result: TrialResult | Trial, index: int, listed: Callable[[], TrialResult]
    ) -> None:
        self.verdicts[_INDEX[result.verdict]] += 1
        if _counts(result.usage):
            self.usage = self.usage + result.usage
        if _counts(result.grader_usage):
            self.grader_usage = self.grader_usage + result.grader_usage
        self.cost_known = _add_cost(self.cost, result.cost_usd, self.cost_known)
        self.grader_cost_known = _add_cost(
            self.grader_cost, result.grader_cost_usd, self.grader_cost_known
        )
        for score in result.scores:
            if score.value is not None:
                self.scores.add(score.value)
        self.pending += any(s.pending for s in result.scores)
        self.durations.append(result.duration_s)
        self._span(result.started_at, result.duration_s)
        self._list(index, result.verdict is Verdict.PASS, listed)

    def _span(self, started: datetime | None, duration: float) -> None:
        if not self.starts_known:
            return
        if started is None:
            self.starts_known = False
            self.first_start = self.last_end = None
            return
        end = started + timedelta(seconds=duration)
        if self.first_start is None or started < self.first_start:
            self.first_start = started
        if self.last_end is None or end > self.last_end:
            self.last_end = end

    def _list(self, index: int, passed: bool, listed: Callable[[], TrialResult]) -> None:
        kept = self.listed
        if self.trials > self.max_results:
            if self.trials == self.max_results + 1:  # past the limit: only non-passing ones
                kept[:] = [entry for entry in kept if not entry[1]]
            full = len(kept) >= self.max_results
            if passed or (full and (not kept or index > kept[-1][0])):
                return
        result = listed()
        share_field_sets(result)  # kept to the end of the run: held as lightly as it can be
        bisect.insort(kept, (index, passed, result), key=_trial_of)
        if self.trials > self.max_results:
            del kept[self.max_results :]

    def listed_results(self) -> list[TrialResult]:
        """The results the task's report lists, in trial order."""
        return [result for _, _, result in self.listed]

    def totals(self) -> TaskTotals:
        passed, failed, errors, unknown = self.verdicts
        return TaskTotals(
            passed=passed,
            failed=failed,
            errors=errors,
            unknown=unknown,
            usage=self.usage,
            grader_usage=self.grader_usage,
            cost_usd=self.cost.total() if self.cost_known else None,
            grader_cost_usd=self.grader_cost.total() if self.grader_cost_known else None,
            measures=Measures(
                self.scores.total(),
                self.scores.count,
                metrics.percentile(self.durations, 50),
                metrics.percentile(self.durations, 95),
            ),
            pending=self.pending,
            first_start=self.first_start,
            last_end=self.last_end,
        )


def tally(results: Iterable[TrialResult], max_results: int) -> TaskTally:
    """The tally of one task's `results`."""
    kept = TaskTally(max_results)
    for result in results:
        kept.add(result)
    return kept


def run_measures(tallies: Sequence[TaskTally]) -> Measures:
    """Mean score and latency percentiles over every trial of `tallies`."""
    scores = [p for t in tallies for p in (*t.scores.partials, *t.scores.rest)]
    durations = array("d")
    for t in tallies:
        durations.extend(t.durations)
    count = sum(t.scores.count for t in tallies)
    return Measures(
        math.fsum(scores),
        count,
        metrics.percentile(durations, 50),
        metrics.percentile(durations, 95),
    )


_INDEX = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.ERROR: 2, Verdict.UNKNOWN: 3}


def _trial_of(entry: tuple[int, bool, TrialResult]) -> int:
    return entry[0]


def _counts(usage: Usage) -> bool:
    """Whether adding `usage` changes a total (most trials of code-graded runs add nothing)."""
    return not usage.is_empty()


_NONE = Usage()
"""No tokens: the totals of tasks whose trials add none (never changed: `+` makes a new one)."""


def _add_cost(total: ExactSum, cost: float | None, known: bool) -> bool:
    """Add `cost` to `total`; whether every cost so far is known (one unknown cost makes the
    sum unknown: never counted as zero)."""
    if cost is None:
        return False
    if known:
        total.add(cost)
    return known
