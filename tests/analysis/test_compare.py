"""`trialkit.analysis.compare`: the statistics checked against scipy on constructed data, and
the comparison of stored runs (pairing, exclusions, models, what is read)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]
from sqlalchemy import event

from trialkit.analysis._significance import (
    fewest_changed,
    mcnemar_exact,
    paired_bootstrap,
    pooled_difference,
)
from trialkit.analysis.compare import (
    CompareError,
    Comparison,
    compare_reports,
    compare_runs,
    points,
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


@pytest.mark.parametrize(("confidence", "fewest"), [(0.9, 5), (0.95, 6), (0.99, 8), (0.999, 11)])
def test_fewest_changed_tasks_mcnemar_can_call_significant(confidence: float, fewest: int) -> None:
    assert fewest_changed(confidence) == fewest
    assert mcnemar_exact(fewest, 0) < 1 - confidence <= mcnemar_exact(fewest - 1, 0)


# -- the paired bootstrap ----------------------------------------------------------------------

# 30 tasks of 5 trials: the candidate loses 2 passes on 12 of them (a real drop) ...
BASE = [(5, 5)] * 20 + [(3, 5)] * 10
DROP = [(3, 5)] * 12 + [(5, 5)] * 8 + [(3, 5)] * 10
# ... or gains on some tasks and loses on as many (no drop).
SHUFFLE = [(4, 5)] * 5 + [(5, 5)] * 15 + [(4, 5)] * 5 + [(3, 5)] * 5


def test_pooled_difference_is_passed_over_decided_in_each_run() -> None:
    assert pooled_difference([(3, 4), (1, 2)], [(2, 4), (2, 2)]) == pytest.approx(4 / 6 - 4 / 6)
    assert pooled_difference([(5, 5)], [(0, 10)]) == -1.0
    assert pooled_difference([], []) is None


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    baseline = [(i % 7, 7) for i in range(40)]
    candidate = [((i * 3) % 8, 8) for i in range(40)]

    first = paired_bootstrap(baseline, candidate, resamples=500, seed=7)

    assert first == paired_bootstrap(baseline, candidate, resamples=500, seed=7)
    assert first != paired_bootstrap(baseline, candidate, resamples=500, seed=8)


def test_bootstrap_is_the_percentile_interval_of_paired_task_resamples() -> None:
    """The same resamples drawn independently with `numpy.random.default_rng(seed)`."""
    rng = np.random.default_rng(3)
    a, b = np.array(BASE), np.array(DROP)
    picks = rng.integers(0, len(BASE), size=(2000, len(BASE)))
    diffs = b[picks, 0].sum(1) / b[picks, 1].sum(1) - a[picks, 0].sum(1) / a[picks, 1].sum(1)
    expected = np.quantile(diffs, [0.05, 0.95])

    low, high = paired_bootstrap(BASE, DROP, confidence=0.9, resamples=2000, seed=3) or (0, 0)

    assert (low, high) == pytest.approx(tuple(expected), abs=1e-12)


@pytest.mark.parametrize(("candidate", "worse"), [(DROP, True), (SHUFFLE, False)])
def test_bootstrap_agrees_with_scipys_paired_bootstrap(
    candidate: list[tuple[int, int]], worse: bool
) -> None:
    def difference(pa: Any, da: Any, pb: Any, db: Any, axis: int = -1) -> Any:
        return pb.sum(axis) / db.sum(axis) - pa.sum(axis) / da.sum(axis)

    a, b = np.array(BASE).T, np.array(candidate).T
    scipys = scipy.stats.bootstrap(
        (a[0], a[1], b[0], b[1]),
        difference,
        paired=True,
        method="percentile",
        n_resamples=20_000,
        rng=np.random.default_rng(11),
    ).confidence_interval

    low, high = paired_bootstrap(BASE, candidate, resamples=20_000, seed=0) or (0, 0)

    assert low == pytest.approx(scipys.low, abs=0.01)
    assert high == pytest.approx(scipys.high, abs=0.01)
    assert (high < 0) is worse
    assert low < pooled_difference(BASE, candidate) < high  # type: ignore[operator]


def test_bootstrap_of_identical_runs_is_zero_wide() -> None:
    assert paired_bootstrap(BASE, BASE) == (0.0, 0.0)


def test_bootstrap_memory_stays_bounded_with_many_tasks() -> None:
    many = [(1, 2)] * 50_000
    assert paired_bootstrap(many, many, resamples=100) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("baseline", "candidate", "message"),
    [
        ([(1, 2)], [], "differ in number"),
        ([(1, 0)], [(0, 1)], "decided >= 1"),
        ([(3, 2)], [(0, 1)], "decided >= 1"),
    ],
)
def test_bootstrap_rejects_impossible_counts(
    baseline: list[tuple[int, int]], candidate: list[tuple[int, int]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(baseline, candidate)


def test_bootstrap_rejects_a_confidence_outside_0_1() -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        paired_bootstrap(BASE, BASE, confidence=1.0)


# -- comparing stored runs ---------------------------------------------------------------------


def test_a_known_regression_is_significant_and_gates(store: Store) -> None:
    before = tasks(30, "PPPP")
    after = before | tasks(8, "PFFF")  # 8 of 30 tasks now fail 3 trials in 4
    write_run(store, "run-a", before, model="gpt-4o")
    write_run(store, "run-b", after, model="gpt-4o-mini", hours=1)

    comparison = compare_runs(store, ["run-a", "run-b"])

    pair = comparison.pairs[0]
    assert pair.outcome == "worse"
    assert comparison.worse == [pair]
    assert pair.new_failures == [f"t{i:02d}" for i in range(8)]
    assert pair.fixed == []
    assert pair.mcnemar_p_value == pytest.approx(scipy.stats.binomtest(8, 8, 0.5).pvalue)
    assert pair.difference == pytest.approx(96 / 120 - 1)
    assert pair.difference_ci is not None
    assert pair.difference_ci[1] < 0
    assert pair.conclusion.startswith("B is worse than A on 8 tasks (8 new failures, 0 fixed)")
    assert pair.conclusion.endswith(": significant at 95%.")
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
    assert pair.outcome == "no_difference"
    assert pair.conclusion == (
        "B fails 1 task A passed and fixes as many; the pass rate does not change "
        f"(95% CI {points(pair.difference_ci[0], unit='')} to "  # type: ignore[index]
        f"{points(pair.difference_ci[1])}): not significant at 95%."  # type: ignore[index]
    )


def test_a_known_improvement_is_better(store: Store) -> None:
    write_run(store, "run-a", tasks(12, "FFF") | tasks(12, "PPP", prefix="u"))
    write_run(store, "run-b", tasks(12, "PPP") | tasks(12, "PPP", prefix="u"), hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert pair.outcome == "better"
    assert pair.mcnemar_p_value == pytest.approx(2 / 2**12)
    assert pair.conclusion.startswith("B is better than A on 12 tasks (0 new failures, 12 fixed)")


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
    assert pair.pass_rate_candidate == pytest.approx(4 / 6)
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
    assert (
        pair.conclusion
        == "No task has decided trials in both A and B: there is nothing to compare."
    )


# -- when a difference is significant: the interval and the exact McNemar test agree ----------


def test_one_changed_task_is_too_few_to_tell(store: Store) -> None:
    """The bootstrap over one task is zero wide (−100 to −100); McNemar gives p = 1."""
    write_run(store, "run-a", {"t": "PPP"})
    write_run(store, "run-b", {"t": "FFF"}, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert pair.difference_ci == (-1.0, -1.0)
    assert pair.mcnemar_p_value == 1.0
    assert pair.outcome == "cannot_tell"
    assert pair.conclusion == (
        "B is worse than A on 1 task (1 new failure, 0 fixed); the pass rate drops 100.0 pts "
        "(95% CI −100.0 to −100.0 pts), but only 1 task changed verdict, too few to tell at "
        "95% (it takes at least 6)."
    )


@pytest.mark.parametrize(
    ("failing", "others", "outcome"),
    [
        (5, 0, "cannot_tell"),  # every task fails: a zero-wide interval, McNemar p = 0.0625
        (5, 20, "cannot_tell"),  # the interval is below 0, McNemar p = 0.0625 still
        (6, 0, "worse"),  # McNemar p = 0.031: both agree
        (8, 22, "worse"),
    ],
)
def test_few_changed_tasks_need_mcnemar_to_agree(
    store: Store, failing: int, others: int, outcome: str
) -> None:
    write_run(store, "run-a", tasks(failing, "PPP") | tasks(others, "PPP", prefix="u"))
    write_run(store, "run-b", tasks(failing, "FFF") | tasks(others, "PPP", prefix="u"), hours=1)

    comparison = compare_runs(store, ["run-a", "run-b"])

    pair = comparison.pairs[0]
    assert pair.difference_ci is not None
    assert pair.difference_ci[1] < 0
    assert pair.outcome == outcome
    assert (comparison.worse == [pair]) is (outcome == "worse")


def test_an_interval_below_0_that_mcnemar_does_not_confirm_is_not_significant(
    store: Store,
) -> None:
    """10 tasks lose every pass and 4 gain one: the pass rate drops surely, but 10 new
    failures against 4 fixes is p = 0.18 on the verdicts."""
    before = tasks(10, "PPPP") | tasks(4, "PPPF", prefix="f") | tasks(20, "PPPP", prefix="u")
    after = tasks(10, "FFFF") | tasks(4, "PPPP", prefix="f") | tasks(20, "PPPP", prefix="u")
    write_run(store, "run-a", before)
    write_run(store, "run-b", after, hours=1)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert pair.difference_ci is not None
    assert pair.difference_ci[1] < 0
    assert pair.mcnemar_p_value == pytest.approx(scipy.stats.binomtest(10, 14, 0.5).pvalue)
    assert pair.outcome == "no_difference"
    assert pair.conclusion.endswith(
        "but the exact McNemar test on the verdicts does not confirm it (p = 0.18): "
        "not significant at 95%."
    )


# -- without the `stats` extra -----------------------------------------------------------------


def test_without_scipy_the_comparison_is_the_same(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_run(store, "run-a", tasks(30, "PPPP"))
    write_run(store, "run-b", tasks(30, "PPPP") | tasks(8, "PFFF"), hours=1)
    with_scipy = compare_runs(store, ["run-a", "run-b"])
    monkeypatch.setitem(sys.modules, "scipy", None)  # `import scipy` fails as if not installed
    monkeypatch.setitem(sys.modules, "scipy.stats", None)

    assert compare_runs(store, ["run-a", "run-b"]) == with_scipy
    assert with_scipy.pairs[0].outcome == "worse"


def test_without_numpy_the_interval_names_the_extra(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_run(store, "run-a", tasks(30, "PPPP"))
    write_run(store, "run-b", tasks(30, "PPPP") | tasks(8, "PFFF"), hours=1)
    for name in ("numpy", "scipy", "scipy.stats"):
        monkeypatch.setitem(sys.modules, name, None)

    pair = compare_runs(store, ["run-a", "run-b"]).pairs[0]

    assert (pair.difference_ci, pair.outcome) == (None, "cannot_tell")
    assert pair.difference_ci_unavailable == (
        "the paired bootstrap needs numpy: pip install 'trialkit[stats]'"
    )
    assert pair.mcnemar_p_value == pytest.approx(2 / 2**8)
    assert pair.conclusion == (
        "B is worse than A on 8 tasks (8 new failures, 0 fixed); the pass rate changes by "
        "−20.0 pts (no interval: the paired bootstrap needs numpy: pip install "
        "'trialkit[stats]'): significance not decided."
    )
