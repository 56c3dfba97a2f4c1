from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialkit import Verdict
from trialkit.report import (
    Report,
    RunInfo,
    SuiteInfo,
    TaskPlan,
    TrialResult,
    build_report,
    evaluate_gate,
    task_verdict,
)
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import Trial, TrialStatus

verdict_lists = st.lists(st.sampled_from(list(Verdict)), min_size=1, max_size=12)


@given(verdict_lists)
def test_capability_task_passes_iff_any_trial_passed(verdicts: list[Verdict]) -> None:
    result = task_verdict(SuiteKind.CAPABILITY, verdicts)
    assert (result is Verdict.PASS) == (Verdict.PASS in verdicts)


@given(verdict_lists)
def test_regression_task_passes_iff_every_trial_passed(verdicts: list[Verdict]) -> None:
    result = task_verdict(SuiteKind.REGRESSION, verdicts)
    assert (result is Verdict.PASS) == all(v is Verdict.PASS for v in verdicts)
    if Verdict.FAIL in verdicts:
        assert result is Verdict.FAIL


def test_a_task_with_no_trials_is_an_error() -> None:
    assert task_verdict(SuiteKind.CAPABILITY, []) is Verdict.ERROR


def report_of(kind: SuiteKind, per_task: list[list[Verdict]]):  # type: ignore[no-untyped-def]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    plans = [TaskPlan(id=f"t{i}", kind=kind) for i in range(len(per_task))]
    results = {
        f"t{i}": [TrialResult(trial=j, verdict=v) for j, v in enumerate(vs)]
        for i, vs in enumerate(per_task)
    }
    return build_report(
        RunInfo(id="r", started_at=now, finished_at=now),
        SuiteInfo(id="s", kind=kind),
        plans,
        results,
    )


@given(st.lists(verdict_lists, min_size=1, max_size=6))
def test_summary_counts_add_up(per_task: list[list[Verdict]]) -> None:
    report = report_of(SuiteKind.CAPABILITY, per_task)
    s = report.summary
    flat = [v for vs in per_task for v in vs]
    assert s.trials == len(flat)
    assert (s.passed, s.failed, s.errors, s.unknown) == tuple(
        flat.count(v) for v in (Verdict.PASS, Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN)
    )
    assert s.passed_tasks + s.failed_tasks + s.error_tasks + s.unknown_tasks == s.tasks
    decided = s.passed + s.failed
    if decided == 0:
        assert s.pass_rate is None and s.pass_rate_ci is None
    else:
        rates = [t.passed / t.decided for t in report.tasks if t.decided]
        assert s.pass_rate == pytest.approx(sum(rates) / len(rates))
        assert s.pass_rate_ci is not None
        assert s.pass_rate_ci[0] <= s.pass_rate <= s.pass_rate_ci[1]
    for values in (s.pass_at_k, s.pass_hat_k):
        assert all(0.0 <= v <= 1.0 for v in values.values())
    if s.pass_at_k:
        assert s.pass_at_k["1"] == s.pass_hat_k["1"]


@given(st.lists(verdict_lists, min_size=1, max_size=6))
def test_gate_exit_codes(per_task: list[list[Verdict]]) -> None:
    report = report_of(SuiteKind.REGRESSION, per_task)
    gate = evaluate_gate(report)
    errors = report.summary.errors
    if errors:
        assert gate.exit_code == 3
        assert evaluate_gate(report, fail_on_error=errors).exit_code in (0, 1)
        assert evaluate_gate(report, fail_on_error=errors - 1 if errors > 1 else 0).exit_code == 3
    elif any(t.verdict in (Verdict.FAIL, Verdict.UNKNOWN) for t in report.tasks):
        assert gate.exit_code == 1
    else:
        assert gate.exit_code == 0


def test_fractional_error_allowance() -> None:
    report = report_of(SuiteKind.CAPABILITY, [[Verdict.PASS] * 9 + [Verdict.ERROR]])
    assert evaluate_gate(report, fail_on_error=0.1).exit_code == 0
    assert evaluate_gate(report, fail_on_error=0.05).exit_code == 3
    gate = evaluate_gate(report)
    assert gate.reasons == ["1 of 10 trials errored (allowed: none)"]


def _judged(trial: int, grader_cost: float | None, *, cost: float | None = 0.01) -> TrialResult:
    return TrialResult(
        trial=trial,
        verdict=Verdict.PASS,
        usage=Usage(input_tokens=100, output_tokens=10),
        grader_usage=Usage(input_tokens=20, output_tokens=5, reasoning_tokens=1),
        cost_usd=cost,
        grader_cost_usd=grader_cost,
    )


def _report(results: dict[str, list[TrialResult]]) -> Report:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return build_report(
        RunInfo(id="r", started_at=now, finished_at=now),
        SuiteInfo(id="s", kind=SuiteKind.CAPABILITY),
        [TaskPlan(id=task_id, kind=SuiteKind.CAPABILITY) for task_id in results],
        results,
    )


def test_grader_usage_and_cost_are_summed_apart_from_the_agents() -> None:
    report = _report(
        {"a": [_judged(0, 0.002), _judged(1, 0.003)], "b": [_judged(0, 0.001, cost=0.02)]}
    )

    a, b = report.tasks
    assert a.usage == Usage(input_tokens=200, output_tokens=20)
    assert a.grader_usage == Usage(input_tokens=40, output_tokens=10, reasoning_tokens=2)
    assert a.cost_usd == pytest.approx(0.02)
    assert a.grader_cost_usd == pytest.approx(0.005)
    assert b.grader_cost_usd == pytest.approx(0.001)
    s = report.summary
    assert s.usage == Usage(input_tokens=300, output_tokens=30)
    assert s.grader_usage == Usage(input_tokens=60, output_tokens=15, reasoning_tokens=3)
    assert s.cost_usd == pytest.approx(0.04)
    assert s.grader_cost_usd == pytest.approx(0.006)


def test_an_unknown_grader_cost_makes_the_sums_unknown_not_smaller() -> None:
    report = _report({"a": [_judged(0, 0.002), _judged(1, None)], "b": [_judged(0, 0.001)]})

    a, b = report.tasks
    assert a.grader_cost_usd is None
    assert a.cost_usd == pytest.approx(0.02)
    assert b.grader_cost_usd == pytest.approx(0.001)
    assert report.summary.grader_cost_usd is None
    assert report.summary.cost_usd == pytest.approx(0.03)
    assert report.summary.grader_usage.input_tokens == 60


def test_a_trial_result_copies_the_graders_share_of_a_trial() -> None:
    trial = Trial(
        run_id="r",
        task_id="t",
        index=2,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS,
        usage=Usage(input_tokens=7),
        grader_usage=Usage(input_tokens=3, output_tokens=1),
        cost_usd=0.5,
        grader_cost_usd=0.125,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        duration_s=1.0,
    )

    result = TrialResult.from_trial(trial)

    assert (result.usage, result.grader_usage) == (trial.usage, trial.grader_usage)
    assert (result.cost_usd, result.grader_cost_usd) == (0.5, 0.125)
