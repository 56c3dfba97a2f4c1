"""`trialkit.analysis.compare`: the comparison of stored runs (pairing, exclusions, models,
what is read) and its two answers; the tests themselves are checked against scipy and
statsmodels in test_stats.py."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import pytest
import scipy.stats  # type: ignore[import-untyped]
from sqlalchemy import event

from trialkit.analysis._significance import mcnemar_exact
from trialkit.analysis.compare import (
    CompareError,
    Comparison,
    compare_reports,
    compare_runs,
)
from trialkit.store import RunNotFound, Store
from trialkit.task import SuiteKind

from ._store_runs import write_run


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """An empty store on each backend (PostgreSQL when configured)."""
    with Store(db_url) as opened:
        yield opened


def tasks(n: int, letters: str, *, prefix: str = "t") -> dict[str, str]:
    return {f"{prefix}{i:02d}": letters for i in range(n)}


# -- the exact McNemar test --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new_failures", "fixes"),
    [
        (6, 0),
        (0, 6),
        (8, 1),
        (3, 3),
        (1, 0),
        (10, 4),
        (25, 11),
        (7, 8),
        (500, 520),
        (1, 1000),
        (3000, 2900),
    ],
)
def test_mcnemar_is_scipys_two_sided_binomial_test(new_failures: int, fixes: int) -> None:
    expected = scipy.stats.binomtest(new_failures, new_failures + fixes, 0.5).pvalue

    assert mcnemar_exact(new_failures, fixes) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_on_known_significant_and_null_differences() -> None:
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 2**6)  # 0.03125: significant at 5%
    assert mcnemar_exact(5, 0) == pytest.approx(2 / 2**5)  # 0.0625: not quite
    assert mcnemar_exact(4, 4) == 1.0
    assert mcnemar_exact(0, 0) == 1.0  # no task changed: no evidence either way


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        mcnemar_exact(-1, 2)


# -- comparing stored runs ---------------------------------------------------------------------


def test_a_known_regression_is_significant_and_gates(store: Store) -> None:
    before = tasks(30, "PPPP")
    after = before | tasks(8, "PFFF")  # 8 of 30 tasks now fail 3 trials in 4
    write_run(store, "run-a", before, model="gpt-4o")
    write_run(store, "run-b", after, model="gpt-4o-mini", hours=1)

    comparison = compare_runs(store, ["run-a", "run-b"])

    pair = comparison.pairs[0]
    assert pair.outcome == "worse"
    assert pair.suite_outcome == "worse"
    assert comparison.worse == [pair]
    assert pair.new_failures == [f"t{i:02d}" for i in range(8)]
    assert pair.fixed == []
    assert pair.mcnemar_p_value == pytest.approx(scipy.stats.binomtest(8, 8, 0.5).pvalue)
    assert pair.difference == pytest.approx(8 * -0.75 / 30)
    assert pair.difference_ci is not None
    assert pair.difference_ci[1] < 0
    assert pair.conclusion.startswith("B is worse than A on these tasks: 8 of B's trials passed")
    assert "Verdicts: 8 new failures (t00, t01," in pair.conclusion
    assert [run.model for run in comparison.runs] == ["gpt-4o", "gpt-4o-mini"]


def test_a_known_null_difference_is_not_significant(store: Store) -> None:
    before = tasks(20, "PPP") | {"x": "FFF", "y": "PPP"}
    after = tasks(20, "PPP") | {"x": "PPP", "y": "FFF"}  # one fix, one new failure
    write_run(store, "run-a", before)
    write_run(store, "run-b", after, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert (pair.new_failures, pair.fixed) == (["y"], ["x"])
    assert pair.mcnemar_p_value == 1.0
    assert pair.difference == 0.0
    assert pair.trial_test is not None
    assert pair.trial_test.p_value == 1.0
    assert (pair.outcome, pair.suite_outcome) == ("no_difference", "too_few_tasks")
    assert pair.conclusion.startswith(
        "No significant change from A to B on these tasks: 3 of B's trials passed where 3.0 "
        "were expected if nothing changed (exact stratified test over 2 tasks, p = 1)"
    )
    assert "Verdicts: 1 new failure (y), 1 fixed (x)" in pair.conclusion


def test_a_known_improvement_is_better(store: Store) -> None:
    write_run(store, "run-a", tasks(12, "FFF") | tasks(12, "PPP", prefix="u"))
    write_run(store, "run-b", tasks(12, "PPP") | tasks(12, "PPP", prefix="u"), hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert (pair.outcome, pair.suite_outcome) == ("better", "better")
    assert pair.mcnemar_p_value == pytest.approx(2 / 2**12)
    assert pair.task_test is not None
    assert pair.task_test.sign_flip_p_value == pytest.approx(2 / 2**12)
    assert pair.conclusion.startswith("B is better than A on these tasks")


def test_errors_are_reported_apart_and_not_tested(store: Store) -> None:
    before = {"ok": "PP", "crash": "PP", "judge": "PP", "flips": "PP", "unsure": "PP"}
    after = {"ok": "PP", "crash": "EE", "judge": "PG", "flips": "FF", "unsure": "PU"}
    write_run(store, "run-a", before)
    write_run(store, "run-b", after, hours=1)

    comparison = compare_runs(store, ["run-a", "run-b"])
    pair = comparison.pairs[0]

    assert pair.error_tasks == ["crash", "judge"]
    assert pair.unknown_tasks == ["unsure"]
    assert pair.new_failures == ["flips"]
    assert pair.decided_tasks == 2  # ok, flips
    assert pair.mcnemar_p_value == 1.0  # 1 new failure, 0 fixed
    # The pass rate counts decided trials: `crash` has none in B, the others do.
    assert pair.rate_tasks == 4
    assert pair.pass_rate_candidate == pytest.approx((1 + 1 + 0 + 1) / 4)  # mean over tasks
    assert [(t.id, t.reason) for t in pair.left_out] == [
        ("crash", "pass 2/2 in A, error (2 trials errored) in B")
    ]
    assert "Not compared: crash (pass 2/2 in A, error (2 trials errored) in B)." in (
        pair.conclusion
    )
    changes = {t.id: t.changes[0].change for t in comparison.tasks}
    assert changes == {
        "ok": "unchanged",
        "crash": "error",
        "judge": "error",
        "flips": "new_failure",
        "unsure": "unknown",
    }


def test_tasks_in_one_run_are_listed_and_left_out(store: Store) -> None:
    write_run(store, "run-a", {"kept": "PP", "gone": "PP"})
    write_run(store, "run-b", {"kept": "PP", "new": "FF"}, hours=1)

    comparison = compare_runs(store, ["run-a", "run-b"])
    pair = comparison.pairs[0]

    assert (pair.added, pair.removed, pair.paired_tasks) == (["new"], ["gone"], 1)
    assert [(t.id, t.reason) for t in pair.left_out] == [
        ("new", "not in A, fail 0/2 in B"),  # a failing task added is named as failing
        ("gone", "pass 2/2 in A, not in B"),
    ]
    assert pair.new_failures == []
    assert pair.pass_rate_candidate == 1.0
    by_id = {t.id: t for t in comparison.tasks}
    assert by_id["gone"].cells[1] is None
    assert by_id["new"].cells[0] is None
    assert by_id["new"].changes[0].change == "added"
    assert by_id["gone"].changes[0].change == "removed"


def test_per_task_deltas(store: Store) -> None:
    write_run(store, "run-a", {"t": "PPPP"}, cost_usd=0.01, duration_s=1.0)
    write_run(store, "run-b", {"t": "PPFF"}, cost_usd=0.03, duration_s=2.5, hours=1)

    task = compare_runs(store, ["run-a", "run-b"]).tasks[0]

    assert [(c.passed, c.trials) for c in task.cells if c] == [(4, 4), (2, 4)]
    change = task.changes[0]
    assert change.change == "new_failure"
    assert change.pass_rate_delta == -0.5
    assert change.mean_score_delta == -0.5
    assert change.cost_per_trial_delta == pytest.approx(0.02)
    assert change.latency_p50_delta_s == 1.5


def test_runs_of_different_suites_are_refused_unless_allowed(store: Store) -> None:
    write_run(store, "run-a", {"t": "PP"}, suite="one")
    write_run(store, "run-b", {"t": "PF"}, suite="two", hours=1)

    with pytest.raises(CompareError, match=r"ran suite 'two', but run A .* ran 'one'"):
        compare_runs(store, ["run-a", "run-b"])
    comparison = compare_runs(store, ["run-a", "run-b"], allow_different_suites=True)
    assert [run.suite_id for run in comparison.runs] == ["one", "two"]
    assert comparison.pairs[0].new_failures == ["t"]


def test_more_runs_make_a_matrix_against_the_first(store: Store) -> None:
    write_run(store, "run-a", {"t": "PP", "u": "FF"}, model="m1")
    write_run(store, "run-b", {"t": "FF", "u": "FF"}, model="m2", hours=1)
    write_run(store, "run-c", {"t": "PP", "u": "PP"}, model="m3", hours=2)

    comparison = compare_runs(store, ["run-a", "run-b", "run-c"])

    assert [(r.label, r.model) for r in comparison.runs] == [
        ("A", "m1"),
        ("B", "m2"),
        ("C", "m3"),
    ]
    assert [(p.baseline, p.candidate) for p in comparison.pairs] == [("A", "B"), ("A", "C")]
    assert [t.changes[1].change for t in comparison.tasks] == ["unchanged", "fixed"]
    assert [t.changes[0].change for t in comparison.tasks] == ["new_failure", "unchanged"]


def test_the_model_comes_from_the_trials_when_the_run_names_none(store: Store) -> None:
    write_run(store, "run-a", {"t": "PP"}, trial_model="openai/gpt-4o")
    write_run(store, "run-b", {"t": "PP"}, hours=1)

    runs = compare_runs(store, ["run-a", "run-b"]).runs

    assert (runs[0].model, runs[0].harness) == ("openai/gpt-4o", "agent")
    assert (runs[1].model, runs[1].agent) == (None, "agent")


def test_runs_are_found_by_name_and_prefix(store: Store) -> None:
    write_run(store, "run-a", {"t": "PP"})
    write_run(store, "zzz-b", {"t": "PP"}, hours=1)

    assert [r.id for r in compare_runs(store, ["run", "zzz"]).runs] == ["run-a", "zzz-b"]
    with pytest.raises(RunNotFound):
        compare_runs(store, ["run-a", "nope"])
    with pytest.raises(CompareError, match="at least two runs"):
        compare_runs(store, ["run-a"])


def test_reports_in_memory_compare_the_same(store: Store) -> None:
    write_run(store, "run-a", tasks(10, "PP"), kind=SuiteKind.CAPABILITY)
    write_run(store, "run-b", tasks(10, "FF"), kind=SuiteKind.CAPABILITY, hours=1)
    reports = [store.load_report(run) for run in ("run-a", "run-b")]

    from_memory = compare_reports(reports)
    from_store = compare_runs(store, ["run-a", "run-b"])

    assert from_memory == from_store


def test_the_json_form_reads_back(store: Store) -> None:
    write_run(store, "run-a", {"t": "PP"})
    write_run(store, "run-b", {"t": "PF"}, hours=1)
    comparison = compare_runs(store, ["run-a", "run-b"])

    assert Comparison.model_validate_json(comparison.to_json()) == comparison


def test_comparing_reads_no_wide_column(store: Store) -> None:
    write_run(store, "run-a", tasks(30, "PPF"), trial_model="m")
    write_run(store, "run-b", tasks(30, "PFF"), hours=1)
    statements: list[str] = []

    def keep(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(store._engine, "before_cursor_execute", keep)
    try:
        compare_runs(store, ["run-a", "run-b"])
    finally:
        event.remove(store._engine, "before_cursor_execute", keep)

    reads = [s for s in statements if "FROM trials" in s]
    assert reads
    selected = {column for s in reads for column in re.findall(r"\btrials\.(\w+)", s)}
    wide = {"transcript", "outcome", "scores", "output", "usage", "grader_usage", "error"}
    assert not selected & wide, selected


def test_nothing_decided_in_both_runs_cannot_tell(store: Store) -> None:
    write_run(store, "run-a", {"t": "EE", "u": "PP"})
    write_run(store, "run-b", {"t": "PP", "u": "EE"}, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert (pair.outcome, pair.difference_ci, pair.mcnemar_p_value) == ("cannot_tell", None, None)
    assert pair.error_tasks == ["t", "u"]
    assert pair.conclusion == (
        "No task has decided trials in both A and B: there is nothing to compare. Not "
        "compared: t (error (2 trials errored) in A, pass 2/2 in B), u (pass 2/2 in A, error "
        "(2 trials errored) in B)."
    )


# -- the gate: the exact stratified test over tasks ---------------------------------------------


def test_one_changed_task_of_three_trials_is_not_enough_to_gate(store: Store) -> None:
    """3/3 → 0/3 on the only task: Fisher's exact p = 0.1."""
    write_run(store, "run-a", {"t": "PPP"})
    write_run(store, "run-b", {"t": "FFF"}, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert pair.trial_test is not None
    assert pair.trial_test.p_value == pytest.approx(0.1)
    assert pair.difference_ci is None  # one task: no interval over tasks
    assert (pair.outcome, pair.suite_outcome) == ("no_difference", "too_few_tasks")
    assert pair.suite_conclusion.endswith(
        "too few tasks to tell: with 1 task no test over tasks can reach p < 0.05 (the "
        "smallest possible is 2/2^1 = 1); it takes at least 6 tasks that change."
    )


@pytest.mark.parametrize(
    ("failing", "others", "outcome", "suite_outcome"),
    [
        (1, 20, "worse", "too_few_tasks"),  # 6/6 → 0/6 alone: Holm-adjusted p = 0.045
        (2, 0, "worse", "too_few_tasks"),  # 6 trials a task lost: p = 2/924^2
        (5, 20, "worse", "too_few_tasks"),  # the trials say so; 5 tasks cannot
        (6, 0, "worse", "worse"),
    ],
)
def test_trials_decide_the_gate_and_tasks_decide_tasks_like_these(
    store: Store, failing: int, others: int, outcome: str, suite_outcome: str
) -> None:
    write_run(store, "run-a", tasks(failing, "PPPPPP") | tasks(others, "PPFF", prefix="u"))
    write_run(store, "run-b", tasks(failing, "FFFFFF") | tasks(others, "PPFF", prefix="u"), hours=1)

    comparison = compare_runs(store, ["run-a", "run-b"])

    pair = comparison.pairs[0]
    assert (pair.outcome, pair.suite_outcome) == (outcome, suite_outcome)
    assert (comparison.worse == [pair]) is (outcome == "worse")


def test_trials_that_drop_without_changing_verdicts_gate(store: Store) -> None:
    """A capability suite keeps every verdict (a pass in 4 still passes), yet 20 tasks each
    lose two of their four passes: the trials show it, the verdicts cannot."""
    write_run(store, "run-a", tasks(20, "PPPP"), kind=SuiteKind.CAPABILITY)
    write_run(store, "run-b", tasks(20, "PPFF"), kind=SuiteKind.CAPABILITY, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert (pair.new_failures, pair.mcnemar_p_value) == ([], 1.0)
    assert (pair.outcome, pair.suite_outcome) == ("worse", "worse")


def test_a_task_named_as_changed_survives_holm(store: Store) -> None:
    before = {"broken": "P" * 10} | tasks(12, "PPFF")
    after = {"broken": "F" * 10} | tasks(12, "PPFF")
    write_run(store, "run-a", before)
    write_run(store, "run-b", after, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert pair.trial_test is not None
    named = [t.id for t in pair.trial_test.task_tests if t.significant]
    assert named == ["broken"]
    broken = pair.trial_test.task_tests[0]
    fisher = scipy.stats.fisher_exact([[10, 0], [0, 10]]).pvalue
    assert broken.p_value == pytest.approx(fisher, rel=1e-9)
    assert broken.adjusted_p_value == pytest.approx(fisher * 13, rel=1e-9)
    assert "changed on their own (Fisher's exact test, Holm-adjusted over 13 tasks): broken " in (
        pair.conclusion
    )


def test_without_scipy_or_numpy_the_comparison_is_the_same(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_run(store, "run-a", tasks(30, "PPPP"))
    write_run(store, "run-b", tasks(30, "PPPP") | tasks(8, "PFFF"), hours=1)
    with_them = compare_runs(store, ["run-a", "run-b"])
    for name in ("numpy", "scipy", "scipy.stats", "statsmodels"):
        monkeypatch.setitem(sys.modules, name, None)  # `import` fails as if not installed

    assert compare_runs(store, ["run-a", "run-b"]) == with_them
    assert with_them.pairs[0].outcome == "worse"
