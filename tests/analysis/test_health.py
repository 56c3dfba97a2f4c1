"""`trialkit.analysis.health`: the rules on synthetic histories written straight to the store,
and the statistics against scipy."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.stats  # type: ignore[import-untyped]
from sqlalchemy import event

from trialkit.analysis._significance import chi2_sf, cochran_q
from trialkit.analysis.health import (
    HealthError,
    SuiteHealth,
    TaskHealth,
    slope,
    suite_health,
)
from trialkit.store import Store
from trialkit.task import SuiteKind

from ._store_runs import write_run


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """An empty store on each backend (PostgreSQL when configured)."""
    with Store(db_url) as opened:
        yield opened


def write_history(store: Store, runs: list[dict[str, str]], **options: object) -> None:
    """One run per dict, an hour apart, oldest first."""
    for hour, tasks in enumerate(runs):
        write_run(store, f"run-{hour}", tasks, hours=hour, **options)  # type: ignore[arg-type]


def task(health: SuiteHealth, task_id: str) -> TaskHealth:
    return next(t for t in health.tasks if t.id == task_id)


# -- saturated ---------------------------------------------------------------------------------


def test_a_capability_task_passing_every_trial_is_a_graduation_candidate(store: Store) -> None:
    write_history(
        store,
        [{"easy": "PPP", "hard": "PFF"}, {"easy": "PPP", "hard": "FFP"}],
        kind=SuiteKind.CAPABILITY,
    )

    health = suite_health(store)

    assert health.saturated == ["easy"]
    assert health.graduation_candidates == ["easy"]
    assert health.saturated_share == 0.5
    assert not task(health, "hard").saturated


def test_a_saturated_regression_task_is_not_a_graduation_candidate(store: Store) -> None:
    write_history(store, [{"t": "PP"}, {"t": "PP"}], kind=SuiteKind.REGRESSION)

    health = suite_health(store)

    assert health.saturated == ["t"]
    assert health.graduation_candidates == []


def test_saturation_needs_two_runs(store: Store) -> None:
    write_history(store, [{"t": "PPPPP"}])

    health = suite_health(store)

    assert health.saturated == []
    assert health.notes == ["only 1 run in the window: saturation and trends need 2 runs of a task"]


def test_one_errored_trial_is_not_saturated(store: Store) -> None:
    write_history(store, [{"t": "PPP"}, {"t": "PPE"}])

    assert suite_health(store).saturated == []


# -- broken ------------------------------------------------------------------------------------


def test_a_task_no_model_ever_passed_is_broken_with_evidence(store: Store) -> None:
    write_run(store, "run-0", {"bad": "FFE", "ok": "PP"}, model="m1")
    write_run(store, "run-1", {"bad": "FFF", "ok": "PP"}, model="m2", hours=1)

    health = suite_health(store)

    assert health.broken == ["bad"]
    assert task(health, "bad").evidence == [
        "never passed: 0 of 6 trials in 2 runs (5 failed, 1 errored), run by m1, m2"
    ]


def test_a_task_one_model_never_passed_says_it_may_only_be_hard(store: Store) -> None:
    write_history(store, [{"bad": "FF"}, {"bad": "FF"}], model="m1")

    evidence = task(suite_health(store), "bad").evidence

    assert evidence == [
        "never passed: 0 of 4 trials in 2 runs (4 failed), run by m1; "
        "only one model ran it, so it may be hard rather than broken"
    ]


def test_rare_grader_errors_are_listed_but_do_not_mark_broken(store: Store) -> None:
    write_history(store, [{"rare": "PGPG"}, {"rare": "PPPP"}])  # 2 of 8: a quarter

    rare = task(suite_health(store), "rare")

    assert not rare.broken
    assert rare.evidence == []
    assert [(g.grader, g.errors, g.trials) for g in rare.grader_errors] == [("judge", 2, 8)]
    assert rare.grader_errors[0].example == "ValueError: unparseable judge answer"


def test_grader_errors_on_half_the_trials_mark_broken(store: Store) -> None:
    write_history(store, [{"judged": "PGPG", "fine": "PPPP"}, {"judged": "GPGP", "fine": "PPPP"}])

    health = suite_health(store)

    assert health.broken == ["judged"]
    assert task(health, "judged").evidence == [
        "grader 'judge' errored on 4 of 8 trials: ValueError: unparseable judge answer"
    ]
    assert task(health, "fine").grader_errors == []


# -- flaky and trend ---------------------------------------------------------------------------


def test_flaky_means_the_trials_of_one_run_disagree(store: Store) -> None:
    write_history(
        store,
        [
            {"flaky": "PFP", "steady": "PPP", "changed": "PPP"},
            {"flaky": "PPP", "steady": "PPP", "changed": "FFF"},
            {"flaky": "FPF", "steady": "PPP", "changed": "FFF"},
        ],
    )

    health = suite_health(store)

    assert health.flaky == ["flaky"]
    assert task(health, "flaky").flaky_runs == 2
    assert not task(health, "changed").flaky  # runs disagree, trials of each run agree


def test_trend_is_the_least_squares_slope_of_the_pass_rate_per_run(store: Store) -> None:
    write_history(
        store,
        [{"t": "PPPP"}, {"t": "PPPF"}, {"t": "EEEE"}, {"t": "PFFF"}, {"t": "FFFF"}],
    )

    t = task(suite_health(store), "t")

    assert t.pass_rates == [1.0, 0.75, None, 0.25, 0.0]
    expected = scipy.stats.linregress([0, 1, 3, 4], [1.0, 0.75, 0.25, 0.0]).slope
    assert t.trend == pytest.approx(expected)
    assert t.trend is not None and t.trend < 0


@pytest.mark.parametrize(
    "values",
    [[0.1, 0.5, 0.4, 0.9], [1.0, None, 0.5, 0.5, None, 0.0], [0.3, 0.3]],
)
def test_slope_matches_scipy(values: list[float | None]) -> None:
    x = [i for i, v in enumerate(values) if v is not None]
    y = [v for v in values if v is not None]

    assert slope(values) == pytest.approx(scipy.stats.linregress(x, y).slope, abs=1e-12)


def test_slope_needs_two_points() -> None:
    assert slope([None, 0.5, None]) is None
    assert slope([]) is None


# -- the window --------------------------------------------------------------------------------


def test_the_window_is_the_last_runs_of_the_suite(store: Store) -> None:
    write_history(store, [{"t": "FF"}, {"t": "PP"}, {"t": "PP"}, {"t": "PP"}])
    write_run(store, "other", {"t": "FF"}, suite="other", hours=10)

    latest = suite_health(store)  # the latest run's suite: "other", one run
    health = suite_health(store, "suite", last=3)

    assert latest.suite.id == "other"
    assert [r.id for r in latest.runs] == ["other"]
    assert [r.id for r in health.runs] == ["run-1", "run-2", "run-3"]
    assert health.saturated == ["t"]
    assert suite_health(store, "suite", last=4).saturated == []


def test_tasks_keep_the_latest_runs_order_then_older_tasks(store: Store) -> None:
    write_history(store, [{"old": "PP", "b": "PP"}, {"b": "PP", "a": "PP"}])

    health = suite_health(store)

    assert [t.id for t in health.tasks] == ["b", "a", "old"]
    assert task(health, "old").runs == 1
    assert task(health, "old").pass_rates == [1.0, None]


def test_no_runs_or_no_such_suite_is_an_error(store: Store) -> None:
    with pytest.raises(HealthError, match="no runs yet"):
        suite_health(store)
    write_run(store, "run-0", {"t": "PP"}, suite="alpha")
    with pytest.raises(HealthError, match=r"no run of suite 'beta' .* \(suites with runs: alpha\)"):
        suite_health(store, "beta")


# -- discrimination ----------------------------------------------------------------------------


def test_two_models_passing_different_tasks_are_discriminated(store: Store) -> None:
    strong = {f"t{i}": "PP" for i in range(10)}
    weak = {f"t{i}": ("FF" if i < 7 else "PP") for i in range(10)}
    write_run(store, "run-0", strong, model="strong")
    write_run(store, "run-1", weak, model="weak", hours=1)

    d = suite_health(store).discrimination

    assert d.models == ["strong", "weak"]
    assert d.passed_tasks == {"strong": 10, "weak": 3}
    assert len(d.discriminating_tasks) == 7
    assert d.test == "mcnemar_exact"
    assert d.p_value == pytest.approx(scipy.stats.binomtest(7, 7, 0.5).pvalue)
    assert d.discriminates is True
    assert d.conclusion == (
        "the suite discriminates between the 2 models at 95%: "
        "7 of 10 tasks split them (exact McNemar p = 0.0156)"
    )


def test_models_passing_the_same_tasks_are_not_discriminated(store: Store) -> None:
    same = {f"t{i}": ("PP" if i % 2 else "FF") for i in range(10)}
    write_run(store, "run-0", same, model="a")
    write_run(store, "run-1", same | {"t0": "PP"}, model="b", hours=1)
    write_run(store, "run-2", same, model="c", hours=2)

    d = suite_health(store).discrimination

    assert d.test == "cochran_q"
    assert d.discriminating_tasks == ["t0"]
    assert d.discriminates is False
    assert d.p_value is not None
    assert d.p_value > 0.05


def test_each_models_latest_run_is_the_one_compared(store: Store) -> None:
    write_run(store, "run-0", {"t": "FF", "u": "FF"}, model="a")
    write_run(store, "run-1", {"t": "PP", "u": "PP"}, model="b", hours=1)
    write_run(store, "run-2", {"t": "PP", "u": "PP"}, model="a", hours=2)

    d = suite_health(store).discrimination

    assert d.passed_tasks == {"a": 2, "b": 2}
    assert d.discriminating_tasks == []
    assert (d.p_value, d.discriminates) == (1.0, False)


def test_one_model_cannot_tell(store: Store) -> None:
    write_history(store, [{"t": "PP"}, {"t": "FF"}], model="only")

    d = suite_health(store).discrimination

    assert d.discriminates is None
    assert d.conclusion == (
        "cannot tell whether the suite discriminates: "
        "only only ran the suite in the window: run another model to tell"
    )


def test_cochran_q_is_scipys_friedman_test_on_binary_data() -> None:
    rng = np.random.default_rng(5)
    rows = (rng.random((30, 4)) < np.array([0.2, 0.5, 0.5, 0.9])).tolist()

    q, p = cochran_q(rows)

    friedman = scipy.stats.friedmanchisquare(*np.array(rows, dtype=float).T)
    assert q == pytest.approx(friedman.statistic)
    assert p == pytest.approx(friedman.pvalue)


def test_cochran_q_for_two_models_is_mcnemars_chi_squared() -> None:
    rows = [[True, False]] * 9 + [[False, True]] * 3 + [[True, True]] * 5

    q, p = cochran_q(rows)

    assert q == pytest.approx((9 - 3) ** 2 / (9 + 3))
    assert p == pytest.approx(scipy.stats.chi2.sf(q, 1))
    assert cochran_q([[True, True, True], [False, False, False]]) == (0.0, 1.0)


@pytest.mark.parametrize("dof", range(1, 13))
@pytest.mark.parametrize("x", [0.0, 0.01, 0.5, 1.0, 3.84, 9.2, 25.0, 80.0, 400.0])
def test_chi2_tail_is_scipys(x: float, dof: int) -> None:
    assert chi2_sf(x, dof) == pytest.approx(scipy.stats.chi2.sf(x, dof), rel=1e-12, abs=1e-300)


def test_health_needs_no_scipy(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(store, "run-0", {"t": "PP", "u": "PP", "v": "FF"}, model="a")
    write_run(store, "run-1", {"t": "FF", "u": "PP", "v": "FF"}, model="b", hours=1)
    write_run(store, "run-2", {"t": "PP", "u": "FF", "v": "PP"}, model="c", hours=2)
    with_scipy = suite_health(store)
    for name in ("numpy", "scipy", "scipy.stats"):
        monkeypatch.setitem(sys.modules, name, None)  # `import` fails as if not installed

    assert suite_health(store) == with_scipy
    assert with_scipy.discrimination.test == "cochran_q"


# -- what is read ------------------------------------------------------------------------------


def test_health_reads_counts_not_trials(store: Store) -> None:
    write_history(store, [{f"t{i}": "PFG" for i in range(20)}] * 3, trial_model="m")
    statements: list[str] = []

    def keep(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(store._engine, "before_cursor_execute", keep)
    try:
        suite_health(store)
    finally:
        event.remove(store._engine, "before_cursor_execute", keep)

    selected = {column for s in statements for column in re.findall(r"\btrials\.(\w+)", s)}
    assert selected <= {"run_id", "task_id", "verdict", "model"}, selected


def test_the_json_form_reads_back(store: Store) -> None:
    write_history(store, [{"t": "PF"}, {"t": "PP"}])
    health = suite_health(store)

    assert SuiteHealth.model_validate_json(health.to_json()) == health


def test_counts_read_with_the_task_history_give_the_same_health(store: Store) -> None:
    from trialkit.store.browse import task_history_and_counts

    write_history(
        store,
        [
            {"flaky": "PFP", "steady": "PPP", "broken": "EEE", "unknown": "U"},
            {"flaky": "PPP", "steady": "PPP", "broken": "FFF", "new": "P"},
            {"flaky": "FPF", "steady": "PPP", "broken": "FEF", "new": "PF"},
        ],
    )
    history, counts = task_history_and_counts(store, "suite", runs=2)

    given = suite_health(store, "suite", last=2, counts=counts)

    assert len(counts) == 2 == len(history.runs)
    assert given == suite_health(store, "suite", last=2)
    assert given.flaky == ["flaky", "new"]
