"""Krippendorff's alpha against Krippendorff's own worked examples, and against its
coincidence-matrix definition on generated data."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trialkit.analysis import coincidence_matrix, judge_agreement, krippendorff_alpha
from trialkit.analysis.agreement import Level
from trialkit.labels import Label
from trialkit.score import Score, Verdict
from trialkit.trial import Trial, TrialStatus

N = None

# K. Krippendorff, "Computing Krippendorff's Alpha-Reliability" (2011), example C: four
# observers, twelve units, missing values; unit 12 has a single value and pairs nothing.
RELIABILITY_DATA = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]


def test_krippendorffs_example_with_missing_values_nominal() -> None:
    found = krippendorff_alpha(RELIABILITY_DATA, level="nominal")

    assert found.alpha == pytest.approx(0.743, abs=5e-4)
    assert (found.units, found.values, found.units_left_out) == (11, 40, 1)
    assert found.raters == ["rater 1", "rater 2", "rater 3", "rater 4"]


def test_krippendorffs_example_with_missing_values_interval() -> None:
    found = krippendorff_alpha(RELIABILITY_DATA, level="interval")

    assert found.alpha == pytest.approx(0.849, abs=5e-4)


def test_the_coincidence_matrix_of_krippendorffs_example() -> None:
    values, matrix = coincidence_matrix(RELIABILITY_DATA)

    assert values == [1, 2, 3, 4, 5]
    # The paper's table, in thirds: o[1,1] = 7, o[1,2] = 4/3, ...; n_c = 9, 13, 10, 5, 3.
    assert (matrix * 3).round(9).tolist() == [
        [21, 4, 1, 1, 0],
        [4, 30, 4, 1, 0],
        [1, 4, 24, 1, 0],
        [1, 1, 1, 12, 0],
        [0, 0, 0, 0, 9],
    ]
    assert matrix.sum(axis=1).round(9).tolist() == [9, 13, 10, 5, 3]


def test_krippendorffs_two_observer_examples() -> None:
    # Example A: binary data, two observers, no missing values.
    binary = [[0, 1, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 1, 0, 0, 0, 0]]
    # Example B: nominal data, two observers, no missing values.
    nominal = [list("aabbdcccedda"), list("babbbccceddd")]

    assert krippendorff_alpha(binary).alpha == pytest.approx(0.095, abs=5e-4)
    assert krippendorff_alpha(nominal).alpha == pytest.approx(0.692, abs=5e-4)


@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_perfect_agreement_is_one(level: Level) -> None:
    data: list[list[float | None]] = [[0.0, 1.0, 0.5, N], [0.0, 1.0, 0.5, 0.25], [N, 1.0, N, 0.25]]

    assert krippendorff_alpha(data, level=level).alpha == 1.0


@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_one_value_only_is_undefined(level: Level) -> None:
    found = krippendorff_alpha([[1, 1, N], [1, N, 1], [N, 1, 1]], level=level)

    assert found.alpha is None
    assert found.reason == "every value is the same, so no disagreement was possible"


def test_no_unit_with_two_values_is_undefined() -> None:
    found = krippendorff_alpha([["pass", N], [N, "fail"]])

    assert (found.alpha, found.reason) == (None, "no unit has values from 2 raters")
    assert (found.units, found.values, found.units_left_out) == (0, 0, 2)
    assert krippendorff_alpha([]).alpha is None


def test_bad_data_is_refused() -> None:
    with pytest.raises(ValueError, match="row 1 has 1 values, row 0 has 2"):
        krippendorff_alpha([[1, 2], [1]])
    with pytest.raises(ValueError, match="interval data must be numbers"):
        krippendorff_alpha([["pass", "fail"], ["pass", "pass"]], level="interval")
    with pytest.raises(ValueError, match="2 rater names for 1 rows"):
        krippendorff_alpha([[1, 2]], raters=["a", "b"])


def alpha_by_definition(data: list[list[float | None]], level: Level) -> float | None:
    """Alpha straight from the definition: 1 − (n − 1) Σ o δ² / Σ n_c n_k δ²."""
    values, o = coincidence_matrix(data)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    v = np.array(values, dtype=float)
    delta = (v[:, None] != v[None, :]).astype(float)
    if level == "interval":
        delta = (v[:, None] - v[None, :]) ** 2
    expected = (np.outer(n_c, n_c) * delta).sum()
    if n == 0 or expected == 0:
        return None
    return float(1 - (n - 1) * (o * delta).sum() / expected)


@st.composite
def reliability_data(draw: st.DrawFn) -> list[list[float | None]]:
    raters = draw(st.integers(2, 4))
    units = draw(st.integers(1, 12))
    cell = st.none() | st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
    return [[draw(cell) for _ in range(units)] for _ in range(raters)]


@given(data=reliability_data(), level=st.sampled_from(["nominal", "interval"]))
def test_alpha_matches_its_coincidence_matrix_definition(
    data: list[list[float | None]], level: Level
) -> None:
    expected = alpha_by_definition(data, level)

    found = krippendorff_alpha(data, level=level).alpha

    if expected is None:
        assert found is None
    else:
        assert found == pytest.approx(expected, abs=1e-9)


@given(data=reliability_data())
def test_interval_and_nominal_agree_on_two_categories(data: list[list[float | None]]) -> None:
    binary = [[None if v is None else float(v >= 0.5) for v in row] for row in data]

    nominal = krippendorff_alpha(binary, level="nominal").alpha
    interval = krippendorff_alpha(binary, level="interval").alpha

    assert nominal == pytest.approx(interval, abs=1e-9) if nominal is not None else interval is None


# -- judges and humans on stored trials -------------------------------------------------------

STARTED = datetime(2026, 11, 1, tzinfo=UTC)


def make_trial(task: str, index: int, *scores: Score) -> Trial:
    return Trial(
        run_id="run-a",
        task_id=task,
        index=index,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS,
        scores=list(scores),
        started_at=STARTED,
        duration_s=1.0,
    )


def test_judges_and_humans_on_the_same_trials() -> None:
    error = Score(name="b", verdict=Verdict.ERROR)
    trials = [
        make_trial(
            "q", 0, Score.from_value(0.9, pass_at=0.5, name="a"), Score.from_bool(True, name="b")
        ),
        make_trial(
            "q", 1, Score.from_value(0.2, pass_at=0.5, name="a"), Score.from_bool(False, name="b")
        ),
        make_trial("q", 2, Score.from_value(0.7, pass_at=0.5, name="a"), error),
        make_trial(
            "q", 3, Score(name="a", verdict=Verdict.UNKNOWN), Score.from_bool(True, name="b")
        ),
    ]
    labels = [
        Label(task_id="q", trial=0, verdict="pass", score=0.8),
        Label(run_id="run-a", task_id="q", trial=1, verdict="pass"),
        Label(task_id="q", trial=2, verdict="fail"),
        Label(task_id="q", trial=3, verdict="unknown"),
    ]

    nominal = judge_agreement(trials, ["a", "b"], labels=labels)
    interval = judge_agreement(trials, ["a", "b"], labels=labels, level="interval")

    assert nominal.raters == ["a", "b", "human"]
    assert (
        nominal.alpha
        == krippendorff_alpha(
            [["pass", "fail", "pass", N], ["pass", "fail", N, "pass"], ["pass", "pass", "fail", N]]
        ).alpha
    )
    assert (
        interval.alpha
        == krippendorff_alpha(
            [[0.9, 0.2, 0.7, N], [1.0, 0.0, N, 1.0], [0.8, 1.0, 0.0, N]], level="interval"
        ).alpha
    )
    assert (interval.units, interval.units_left_out) == (3, 1)


def vote(name: str, parts: list[str], judges: list[str] | None) -> Score:
    score = Score(name=name, verdict=Verdict.PASS)
    score.assertions = [Score.from_bool(True, name=p).as_assertion() for p in parts]
    if judges is not None:
        score.metadata = {"judges": judges}
    return score


def test_the_default_raters_are_the_judges_a_vote_lists_whatever_their_names() -> None:
    from trialkit.analysis.agreement import default_raters

    listed = vote("panel", ["judge a", "exact", "judge b"], ["judge a", "judge b"])
    assert default_raters([make_trial("q", 0, listed)]) == ["judge a", "judge b"]
    # A vote with fewer than two judges gives way to the judge scores of the run.
    lone = vote("panel", ["judge a", "exact"], ["judge a"])
    single = Score(name="polite?", verdict=Verdict.PASS, metadata={"judge_model": "scripted/x"})
    other = Score(name="kind?", verdict=Verdict.FAIL, metadata={"judge_model": "scripted/y"})
    assert default_raters([make_trial("q", 0, lone, single, other)]) == ["polite?", "kind?"]


def test_a_vote_stored_before_it_listed_its_judges_is_read_by_their_default_names() -> None:
    from trialkit.analysis.agreement import default_raters

    old = vote("majority(...)", ["judge('a')", "judge('b')", "exact"], None)
    assert default_raters([make_trial("q", 0, old)]) == ["judge('a')", "judge('b')"]
    # Once a vote lists its judges, a name is no longer taken as a sign of one.
    listed = vote("panel", ["judge('a')", "judge('b')"], [])
    assert default_raters([make_trial("q", 0, listed)]) == []
