"""Reports computed by the database equal the reports built in memory, to the last bit.

A task of more than `max_results` trials is counted, summed and ranked in SQL; the tests set
`max_results` low so that small runs take that path too, and compare with `build_report`.
"""

from __future__ import annotations

import math
import random
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event

from trialkit import metrics
from trialkit.report import (
    DENSE_KS,
    MAX_RESULTS_PER_TASK,
    TaskPlan,
    TrialResult,
    _exact_sum,
    build_report,
    reported_ks,
)
from trialkit.score import Score, Verdict
from trialkit.store import Store
from trialkit.store.trial_pages import ListedTrial, listed_trials
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import Trial, TrialStatus

from ._samples import Sample, make_sample, make_trial

SIZES = {"none": 0, "one": 1, "few": 3, "some": 7, "many": 40}


def _varied_run(seed: int) -> Sample:
    """Tasks of every size, with verdicts of every kind, costs whose naive sum is inexact,
    unknown costs, tied durations and scores with and without values."""
    rng = random.Random(seed)
    sample = make_sample(f"varied-{seed}")
    sample.plans = [
        TaskPlan(id=task_id, kind=rng.choice([SuiteKind.CAPABILITY, SuiteKind.REGRESSION]))
        for task_id in SIZES
    ]
    sample.trials = []
    for task_id, size in SIZES.items():
        for index in range(size):
            verdict = rng.choices(list(Verdict), weights=[6, 3, 1, 1])[0]
            cost = None if task_id == "some" and index == 3 else rng.choice([0.1, 0.2, 0.7e-5])
            scores = [
                Score.from_bool(verdict is Verdict.PASS, name="contains"),
                Score(name="judge", value=rng.choice([None, 0.1, 0.3, rng.random()])),
            ]
            trial = make_trial(
                sample.run.id,
                task_id,
                index,
                verdict=verdict,
                status=TrialStatus.ERROR if verdict is Verdict.ERROR else TrialStatus.COMPLETED,
                output=f"answer {index} " * rng.randint(0, 3),
                scores=scores,
                cost_usd=cost,
            )
            sample.trials.append(
                trial.model_copy(
                    update={
                        "duration_s": rng.choice([0.5, 1.25, rng.uniform(0, 3)]),
                        "usage": Usage(
                            input_tokens=rng.randint(0, 500),
                            output_tokens=rng.randint(0, 50),
                            cache_read_tokens=rng.choice([0, 128]),
                            reasoning_tokens=rng.randint(0, 9),
                        ),
                        "grader_usage": Usage(input_tokens=rng.randint(0, 40), output_tokens=2),
                        "grader_cost_usd": None if cost is None else cost / 10,
                    }
                )
            )
    return sample


def _results(trials: list[Trial]) -> dict[str, list[TrialResult]]:
    results: dict[str, list[TrialResult]] = {}
    for trial in trials:
        results.setdefault(trial.task_id, []).append(TrialResult.from_trial(trial))
    return results


def _save(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)


@pytest.mark.parametrize("max_results", [0, 2, 5, MAX_RESULTS_PER_TASK])
def test_a_report_from_sql_equals_the_report_in_memory(store: Store, max_results: int) -> None:
    sample = _varied_run(seed=max_results)
    _save(store, sample)
    finished = sample.run.model_copy(
        update={"status": "completed", "finished_at": sample.run.started_at + timedelta(1)}
    )
    store.finish_run(finished)

    report = store.load_report(sample.run.id, max_results=max_results)

    expected = build_report(
        finished, sample.suite, sample.plans, _results(sample.trials), max_results=max_results
    )
    assert report.model_dump() == expected.model_dump()


def test_a_big_task_lists_its_first_non_passing_trials_and_counts_the_rest(
    store: Store,
) -> None:
    sample = make_sample("big")
    verdicts = [Verdict.PASS, Verdict.FAIL, Verdict.PASS, Verdict.ERROR, Verdict.UNKNOWN] * 4
    sample.trials = [
        make_trial("big", "france", i, verdict=v, output=f"#{i}") for i, v in enumerate(verdicts)
    ]
    _save(store, sample)

    france = store.load_report("big", max_results=5).task("france")

    assert [r.trial for r in france.results] == [1, 3, 4, 6, 8]
    assert all(r.verdict is not Verdict.PASS for r in france.results)
    assert france.results_omitted == 20 - 5
    assert (france.trials, france.passed, france.failed, france.errors, france.unknown) == (
        20,
        8,
        4,
        4,
        4,
    )
    small = store.load_report("big").task("france")
    assert [r.trial for r in small.results] == list(range(20))
    assert small.results_omitted == 0


def test_costs_are_summed_exactly_and_an_unknown_cost_stays_unknown(store: Store) -> None:
    sample = make_sample("costs")
    sample.trials = [make_trial("costs", "france", i, cost_usd=0.1) for i in range(10)]
    sample.trials += [make_trial("costs", "json", 0, cost_usd=None)]
    _save(store, sample)

    for max_results in (0, 100):
        report = store.load_report("costs", max_results=max_results)
        assert report.task("france").cost_usd == 1.0  # a naive sum gives 0.9999999999999999
        assert report.task("json").cost_usd is None
        assert report.summary.cost_usd is None


def test_trials_of_tasks_the_run_did_not_plan_are_left_out(store: Store) -> None:
    sample = make_sample("extra")
    _save(store, sample)
    store.save_trials([make_trial("extra", "ghost", i, cost_usd=5.0) for i in range(3)])

    expected = build_report(sample.run, sample.suite, sample.plans, _results(sample.trials))
    for max_results in (0, 100):
        report = store.load_report("extra", max_results=max_results)
        assert report.summary == expected.summary


def test_big_tasks_have_pass_k_for_the_first_ks_and_the_largest(store: Store) -> None:
    sample = make_sample("long")
    n = DENSE_KS + 20
    sample.trials = [
        make_trial("long", "france", i, verdict=Verdict.PASS if i % 3 else Verdict.FAIL)
        for i in range(n)
    ]
    _save(store, sample)

    france = store.load_report("long").task("france")

    assert list(france.pass_at_k) == [str(k) for k in [*range(1, DENSE_KS + 1), n]]
    assert france.pass_hat_k["2"] == float(metrics.pass_hat_k(n, france.passed, 2))
    assert france.results_omitted == n - MAX_RESULTS_PER_TASK


def test_reported_ks() -> None:
    assert reported_ks(0) == []
    assert reported_ks(3) == [1, 2, 3]
    assert reported_ks(DENSE_KS) == list(range(1, DENSE_KS + 1))
    assert reported_ks(DENSE_KS + 1) == [*range(1, DENSE_KS + 1), DENSE_KS + 1]


@given(st.integers(1, 130).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_pass_k_tables_equal_the_exact_metrics(counts: tuple[int, int]) -> None:
    n, c = counts
    plan = TaskPlan(id="t", kind=SuiteKind.CAPABILITY)
    results = [
        TrialResult(trial=i, verdict=Verdict.PASS if i < c else Verdict.FAIL) for i in range(n)
    ]
    report = build_report(make_sample("r").run, make_sample("r").suite, [plan], {"t": results})

    for k in reported_ks(n):
        assert report.tasks[0].pass_at_k[str(k)] == float(metrics.pass_at_k(n, c, k))
        assert report.tasks[0].pass_hat_k[str(k)] == float(metrics.pass_hat_k(n, c, k))
        assert report.summary.pass_at_k[str(k)] == metrics.mean_pass_at_k([(n, c)], k)


@given(
    st.lists(
        st.tuples(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), st.integers(1, 1000)),
        max_size=50,
    )
)
def test_exact_sums_of_repeated_values_round_like_fsum(terms: list[tuple[float, int]]) -> None:
    every = [value for value, times in terms for _ in range(times)]

    assert _exact_sum(terms) == math.fsum(every)
    assert _exact_sum(terms) == float(sum((Fraction(v) * n for v, n in terms), Fraction(0)))


def test_the_report_queries_read_indexes_not_the_wide_rows(sqlite_db_url: str) -> None:
    sample = _varied_run(seed=1)
    with Store(sqlite_db_url) as store:
        _save(store, sample)
        statements: list[tuple[str, Any]] = []

        def keep(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
            statements.append((statement, parameters))

        event.listen(store._engine, "before_cursor_execute", keep)
        store.load_report(sample.run.id, max_results=2)
        store.list_runs()
        event.remove(store._engine, "before_cursor_execute", keep)

        with store._engine.connect() as conn:
            plans = {
                statement: " / ".join(
                    row[-1]
                    for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
                )
                for statement, parameters in statements
                if statement.lstrip().upper().startswith(("SELECT", "WITH"))
            }
    steps = [step for plan in plans.values() for step in plan.split(" / ") if " trials " in step]
    assert steps
    for step in steps:  # the wide rows are read only for trials of one task, by index
        assert "COVERING INDEX" in step or "task_id=?" in step, step
    grouped = [plan for s, plan in plans.items() if "GROUP BY trials.task_id" in s]
    assert grouped
    assert all(
        "COVERING INDEX ix_trials_report" in plan or "COVERING INDEX ix_trials_task_span" in plan
        for plan in grouped
    )
    assert any("COVERING INDEX ix_trials_task_span" in plan for plan in plans.values())
    scored = [plan for s, plan in plans.items() if "GROUP BY scores.task_id" in s]
    assert all("COVERING INDEX ix_scores_run_task_value" in plan for plan in scored)


@pytest.mark.parametrize("most", [0, 2, 5, MAX_RESULTS_PER_TASK])
def test_the_trials_listed_for_a_page_of_tasks_are_those_the_report_lists(
    store: Store, most: int
) -> None:
    sample = _varied_run(seed=most + 7)
    _save(store, sample)
    report = store.load_report(sample.run.id, max_results=most)
    page = {task.id: task.trials for task in report.tasks[1:]}  # a page: not every task

    listed = listed_trials(store, sample.run.id, page, most=most)

    assert set(listed) == set(page)
    for task in report.tasks[1:]:
        assert listed[task.id] == [ListedTrial(r.trial, r.verdict) for r in task.results]
