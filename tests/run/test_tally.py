"""Running tallies give a task's figures exactly as the whole list of its results would."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trialkit import metrics
from trialkit.outcome import Outcome
from trialkit.report import TrialResult
from trialkit.run.tally import ExactSum, TaskTally
from trialkit.score import Score, Verdict
from trialkit.transcript import Usage
from trialkit.trial import Trial, TrialStatus

START = datetime(2026, 12, 1, tzinfo=UTC)


FLOATS = st.floats(min_value=-1e300, max_value=1e300, width=64)
"""Where `math.fsum` itself gives one answer in any order (near the largest float its
intermediate sums overflow in some orders and not in others)."""


@settings(max_examples=500)
@given(st.lists(FLOATS, max_size=60))
def test_an_exact_sum_is_fsum_of_the_values_in_any_order(values: list[float]) -> None:
    total = ExactSum()
    for value in values:
        total.add(value)
    expected = math.fsum(values)
    assert total.total() == expected
    shuffled = ExactSum()
    for value in random.Random(len(values)).sample(values, len(values)):
        shuffled.add(value)
    assert shuffled.total() == expected
    assert len(total.partials) < 45  # a few partials, however many values


def test_values_near_the_largest_float_are_summed_as_fsum_sums_them() -> None:
    huge = [8.98846567431158e307, 1.0, -8.98846567431158e307, 0.5, 1e-300]
    total = ExactSum()
    for value in huge:
        total.add(value)
    assert total.total() == math.fsum(huge)
    total.add(math.inf)
    assert total.total() == math.inf


def _result(rng: random.Random, trial: int) -> TrialResult:
    verdict = rng.choice([Verdict.PASS, Verdict.PASS, Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN])
    value = rng.random() * 10 ** rng.randint(-8, 3)
    return TrialResult(
        trial=trial,
        verdict=verdict,
        scores=[Score(name="s", value=min(value, 1.0), verdict=verdict)],
        duration_s=rng.random() * 10 ** rng.randint(-4, 2),
        started_at=START + timedelta(seconds=rng.random() * 100),
        usage=Usage(input_tokens=rng.randint(0, 5)),
        cost_usd=rng.random() * 10 ** rng.randint(-9, 0),
    )


def test_a_tally_of_results_in_any_order_matches_the_whole_list() -> None:
    rng = random.Random(7)
    for trials in (0, 1, 5, 20, 21, 300):
        results = [_result(rng, i) for i in range(trials)]
        kept = TaskTally(max_results=20)
        for result in rng.sample(results, len(results)):  # trials finish out of order
            kept.add(result)
        totals = kept.totals()
        values = [s.value for r in results for s in r.scores if s.value is not None]
        durations = [r.duration_s for r in results]
        assert totals.measures.score_sum == math.fsum(values)
        assert totals.measures.latency_p95_s == metrics.percentile(durations, 95)
        assert totals.cost_usd == math.fsum(r.cost_usd or 0.0 for r in results)
        assert totals.usage.input_tokens == sum(r.usage.input_tokens for r in results)
        assert totals.failed == sum(r.verdict is Verdict.FAIL for r in results)
        if results:
            assert totals.first_start == min(r.started_at for r in results if r.started_at)
        non_passing = [r for r in results if r.verdict is not Verdict.PASS]
        expected = results if trials <= 20 else non_passing[:20]
        assert kept.listed_results() == expected


def _trial(rng: random.Random, index: int) -> Trial:
    result = _result(rng, index)
    assert result.started_at is not None
    return Trial(
        run_id="run",
        task_id="task",
        index=index,
        status=TrialStatus.ERROR if result.verdict is Verdict.ERROR else TrialStatus.COMPLETED,
        verdict=result.verdict,
        scores=result.scores,
        outcome=Outcome(output=f"output {index}"),
        usage=result.usage,
        cost_usd=result.cost_usd,
        grader_cost_usd=0.0,
        started_at=result.started_at,
        duration_s=result.duration_s,
    )


def test_a_tally_of_trials_is_the_tally_of_their_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`add_trial` counts a trial as `add` counts its `TrialResult`, and makes that result only
    for the trials the report lists."""
    made: list[int] = []
    from_trial = TrialResult.from_trial

    def counted(trial: Trial) -> TrialResult:
        made.append(trial.index)
        return from_trial(trial)

    rng = random.Random(11)
    for count in (0, 3, 20, 21, 400):
        trials = [_trial(rng, i) for i in range(count)]
        order = rng.sample(trials, len(trials))
        of_results = TaskTally(max_results=20)
        for trial in order:
            of_results.add(TrialResult.from_trial(trial))
        made.clear()
        monkeypatch.setattr(TrialResult, "from_trial", staticmethod(counted))
        of_trials = TaskTally(max_results=20)
        for trial in order:
            of_trials.add_trial(trial)
        monkeypatch.undo()
        assert of_trials.totals() == of_results.totals()
        assert of_trials.listed_results() == of_results.listed_results()
        listed = [result.trial for result in of_trials.listed_results()]
        assert set(listed) <= set(made)
        if count > 100:  # a big task: most of its trials are counted, not made into results
            assert len(made) < count / 2


def test_a_tally_keeps_a_bounded_number_of_results_however_many_trials() -> None:
    rng = random.Random(3)
    kept = TaskTally(max_results=20)
    for i in range(5_000):
        kept.add(_result(rng, i))
    assert len(kept.listed) == 20
    assert len(kept.scores.partials) < 10
    assert kept.trials == 5_000


def test_one_unknown_cost_makes_the_task_s_cost_unknown() -> None:
    rng = random.Random(1)
    kept = TaskTally(max_results=20)
    kept.add(_result(rng, 0))
    kept.add(_result(rng, 1).model_copy(update={"cost_usd": None}))
    kept.add(_result(rng, 2))
    assert kept.totals().cost_usd is None
    assert kept.totals().grader_cost_usd is None  # no trial gave one


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=5, max_size=5))
def test_usage_is_empty_exactly_when_it_equals_no_usage(counts: list[int]) -> None:
    """The tally skips adding usage that is empty, field by field: the same as `== Usage()`
    for every field, so a field added to `Usage` and not to `is_empty` fails here."""
    names = list(Usage.model_fields)
    assert len(names) == len(counts)
    usage = Usage(**dict(zip(names, counts, strict=True)))
    assert usage.is_empty() is (usage == Usage())
