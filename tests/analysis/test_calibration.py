"""Judge calibration: figures checked against scipy and by hand, exclusions counted, undefined
figures reported as undefined."""

from __future__ import annotations

import json
import math
import sys
import warnings
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot
from scipy import stats  # type: ignore[import-untyped]

from trialkit._record import ErrorInfo
from trialkit.analysis import (
    JUDGE_MODEL_KEY,
    Calibration,
    CalibrationError,
    Confusion,
    calibrate,
    choose_grader,
    cohen_kappa,
)
from trialkit.analysis.calibration import correlation
from trialkit.labels import Label
from trialkit.score import Score, Verdict
from trialkit.trial import Trial, TrialStatus

STARTED = datetime(2026, 11, 1, tzinfo=UTC)

# (judge's score, human verdict, human score) for trials q#0..q#7; the judge passes at 0.5.
# Ties on both sides (0.8 twice; the human's 1.0 and 0.0 many times).
KNOWN = [
    (0.9, "pass", None),
    (0.8, "pass", None),
    (0.8, "pass", 0.5),
    (0.3, "fail", None),
    (0.6, "pass", None),
    (0.1, "fail", None),
    (0.7, "fail", None),
    (0.2, "pass", None),
]
JUDGE = [judge for judge, _, _ in KNOWN]
HUMAN = [1.0, 1.0, 0.5, 0.0, 1.0, 0.0, 0.0, 1.0]


def make_trial(task: str, index: int, *scores: Score, run: str = "run-a") -> Trial:
    return Trial(
        run_id=run,
        task_id=task,
        index=index,
        status=TrialStatus.COMPLETED,
        verdict=Verdict.PASS,
        scores=list(scores),
        started_at=STARTED,
        duration_s=1.0,
    )


def judged(value: float, name: str = "judge", **metadata: Any) -> Score:
    score = Score.from_value(value, pass_at=0.5, name=name, rationale=f"judged {value}")
    score.metadata.update(metadata)
    return score


def label(task: str, index: int, verdict: Any, score: float | None = None, **extra: Any) -> Label:
    return Label(task_id=task, trial=index, verdict=verdict, score=score, **extra)


def known() -> tuple[list[Label], list[Trial]]:
    labels = [label("q", i, verdict, score) for i, (_, verdict, score) in enumerate(KNOWN)]
    trials = [make_trial("q", i, judged(j)) for i, j in enumerate(JUDGE)]
    return labels, trials


def test_figures_match_scipy_and_hand_computation() -> None:
    labels, trials = known()

    cal = calibrate(labels, trials, grader="judge")

    assert (cal.labels, cal.pairs, cal.excluded.total) == (8, 8, 0)
    assert cal.spearman.value == pytest.approx(stats.spearmanr(JUDGE, HUMAN).statistic)
    assert cal.pearson.value == pytest.approx(stats.pearsonr(JUDGE, HUMAN).statistic)
    # By hand, ties given their average rank: judge ranks 8 6.5 6.5 3 4 1 5 2, human ranks
    # 6.5 6.5 4 2 6.5 2 2 6.5; the Pearson correlation of the ranks is 15.25 / √(41.5 · 35).
    assert cal.spearman.value == pytest.approx(15.25 / math.sqrt(41.5 * 35))
    assert cal.mae.value == pytest.approx(2.9 / 8)
    assert cal.confusion == Confusion(
        human_pass_judge_pass=4,
        human_pass_judge_fail=1,
        human_fail_judge_pass=1,
        human_fail_judge_fail=2,
    )
    assert cal.agreement.value == 0.75
    assert cal.agreement.ci == pytest.approx((0.4093, 0.9285), abs=1e-4)
    # p_o = 6/8, p_e = (5·5 + 3·3)/64 = 34/64: kappa = (48 − 34) / (64 − 34)
    assert cal.kappa.value == pytest.approx(14 / 30)
    assert cal.runs == ["run-a"]


def test_the_largest_disagreements_come_first_with_their_transcript_command() -> None:
    labels, trials = known()

    cal = calibrate(labels, trials, grader="judge", disagreements=4)

    assert [(d.trial, round(d.difference, 6)) for d in cal.disagreements] == [
        (7, 0.8),
        (6, 0.7),
        (4, 0.4),
        (2, 0.3),
    ]
    worst = cal.disagreements[0]
    assert worst.model_dump() == {
        "run_id": "run-a",
        "task_id": "q",
        "trial": 7,
        "judge_score": 0.2,
        "judge_verdict": "fail",
        "human_score": 1.0,
        "human_verdict": "pass",
        "difference": 0.8,
        "rationale": "judged 0.2",
        "comment": None,
        "command": "trialkit transcripts show 'run-a/q#7'",
    }


def test_pairs_in_agreement_are_no_disagreement() -> None:
    labels = [label("q", 0, "pass"), label("q", 1, "fail")]
    trials = [make_trial("q", 0, judged(1.0)), make_trial("q", 1, judged(0.0))]

    cal = calibrate(labels, trials, grader="judge")

    assert cal.disagreements == []
    assert cal.kappa.value == 1.0
    assert cal.mae.value == 0.0


def test_unknowns_errors_and_unmatched_labels_are_left_out_and_counted() -> None:
    labels, trials = known()
    error = Score.from_error(ErrorInfo(type="ValueError", message="unparseable"), name="judge")
    unknown = Score(name="judge", verdict=Verdict.UNKNOWN)
    relabeled = judged(0.9, labeled_at="2026-11-02T10:00:00+00:00")
    trials += [
        make_trial("x", 0, error),
        make_trial("x", 1, unknown),
        make_trial("x", 2, judged(0.4)),
        make_trial("x", 3, judged(0.9, name="other")),
        make_trial("x", 4, relabeled),
        make_trial("x", 0, judged(0.9), run="run-b"),
    ]
    labels += [
        label("x", 0, "pass"),  # the judge errored
        label("x", 1, "pass"),  # the judge said unknown
        label("x", 2, "unknown"),  # the human could not tell
        label("x", 3, "pass"),  # no score of the judge
        label("x", 4, "pass"),  # the judge's score was replaced by a label
        label("x", 9, "pass"),  # no such trial
        label("x", 0, "pass", run_id="run-b"),  # another run
        label("q", 0, "fail", grader="style"),  # another grader
    ]

    cal = calibrate(labels, trials, grader="judge", run_id="run-a")

    assert cal.excluded.model_dump() == {
        "other_grader": 1,
        "other_run": 1,
        "not_stored": 1,
        "not_graded": 1,
        "relabeled": 1,
        "judge_error": 1,
        "judge_unknown": 1,
        "human_unknown": 1,
    }
    assert (cal.labels, cal.pairs) == (16, 8)
    assert cal.labels == cal.pairs + cal.excluded.total
    assert cal.kappa.value == pytest.approx(14 / 30)  # the same pairs as before


def test_labels_for_the_grader_itself_are_preferred_to_the_humans_own() -> None:
    trials = [make_trial("q", 0, judged(0.9)), make_trial("q", 1, judged(0.1))]
    labels = [
        label("q", 0, "fail"),
        label("q", 1, "fail"),
        label("q", 0, "pass", grader="judge"),
        label("q", 1, "fail", grader="judge"),
    ]

    cal = calibrate(labels, trials, grader="judge")

    assert (cal.pairs, cal.excluded.other_grader, cal.agreement.value) == (2, 2, 1.0)


def test_labels_of_one_other_grader_are_used_when_none_is_for_the_judge_or_human() -> None:
    trials = [make_trial("q", 0, judged(0.9)), make_trial("q", 1, judged(0.1))]
    labels = [label("q", 0, "pass", grader="tone"), label("q", 1, "pass", grader="tone")]

    assert calibrate(labels, trials, grader="judge").pairs == 2
    with pytest.raises(CalibrationError, match=r"several graders \(style, tone\)"):
        calibrate([*labels, label("q", 0, "pass", grader="style")], trials, grader="judge")


def test_labels_without_a_run_match_the_one_run_that_has_the_trial() -> None:
    trials = [make_trial("q", 0, judged(0.9)), make_trial("q", 0, judged(0.9), run="run-b")]

    with pytest.raises(CalibrationError, match=r"several runs match it \(run-a, run-b\)"):
        calibrate([label("q", 0, "pass")], trials, grader="judge")
    assert calibrate([label("q", 0, "pass")], trials, grader="judge", run_id="run-b").runs == [
        "run-b"
    ]


def test_a_grader_no_trial_has_is_an_error_naming_the_graders() -> None:
    labels, trials = known()

    with pytest.raises(CalibrationError, match=r"no labeled trial has a score of grader 'jugde'"):
        calibrate(labels, trials, grader="jugde")


# -- undefined figures -------------------------------------------------------------------------


def test_a_constant_column_has_no_correlation_and_no_warning_escapes() -> None:
    labels = [label("q", i, "pass") for i in range(3)]
    trials = [make_trial("q", i, judged(v)) for i, v in enumerate([0.6, 0.8, 0.9])]

    cal = calibrate(labels, trials, grader="judge")  # warnings are errors in this test suite

    assert cal.spearman.model_dump() == {
        "value": None,
        "reason": "the human scores are all 1",
        "ci": None,
    }
    assert cal.pearson.value is None
    assert cal.kappa.model_dump()["reason"] == "every verdict is pass, so chance agreement is 1"
    assert cal.mae.value == pytest.approx(0.7 / 3)
    assert cal.agreement.value == 1.0


def test_scipy_warns_on_a_constant_column_which_is_why_it_is_caught() -> None:
    with pytest.warns(stats.ConstantInputWarning):
        result = stats.spearmanr([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])
    assert result.statistic != result.statistic  # nan


def test_a_correlation_scipy_finds_undefined_is_undefined() -> None:
    class Result:
        statistic = float("nan")

    def constant_warning(x: Any, y: Any) -> Result:
        warnings.warn("An input array is constant", stats.ConstantInputWarning, stacklevel=2)
        return Result()

    found = correlation(constant_warning, [0.1, 0.2], [0.3, 0.4])

    assert (found.value, found.reason) == (None, "a column is constant")


def test_fewer_than_two_pairs_have_no_correlation() -> None:
    one = calibrate([label("q", 0, "pass")], [make_trial("q", 0, judged(0.7))], grader="judge")

    assert one.spearman.reason == "1 pair: a correlation needs at least 2"
    assert one.mae.value == pytest.approx(0.3)

    none = calibrate([label("q", 0, "unknown")], [make_trial("q", 0, judged(0.7))], grader="judge")

    assert none.pairs == 0
    for figure in (none.spearman, none.pearson, none.mae, none.agreement, none.kappa):
        assert figure.value is None and figure.reason
    assert none.gate(min_kappa=0.5, max_mae=0.2) == [
        "Cohen's kappa is undefined (no pairs to compare), so it cannot meet --min-kappa 0.5",
        "the mean absolute error is undefined (no pairs to compare), so it cannot meet "
        "--max-mae 0.2",
    ]


# -- Cohen's kappa -----------------------------------------------------------------------------


def test_kappa_of_a_textbook_example() -> None:
    # 50 proposals read by two readers: both yes 20, A yes B no 5, A no B yes 10, both no 15.
    # p_o = 35/50 = 0.7; p_yes = 0.5 · 0.6 = 0.3, p_no = 0.5 · 0.4 = 0.2, p_e = 0.5;
    # kappa = (0.7 − 0.5) / (1 − 0.5) = 0.4.
    table = Confusion(
        human_pass_judge_pass=20,
        human_pass_judge_fail=5,
        human_fail_judge_pass=10,
        human_fail_judge_fail=15,
    )

    assert cohen_kappa(table).value == pytest.approx(0.4)


def test_kappa_is_zero_at_chance_and_negative_below() -> None:
    chance = Confusion(
        human_pass_judge_pass=25,
        human_pass_judge_fail=25,
        human_fail_judge_pass=25,
        human_fail_judge_fail=25,
    )
    opposite = Confusion(human_pass_judge_fail=3, human_fail_judge_pass=3)

    assert cohen_kappa(chance).value == 0.0
    assert cohen_kappa(opposite).value == -1.0
    assert cohen_kappa(Confusion()).reason == "no pairs to compare"


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_kappa_follows_its_formula(pairs: list[tuple[bool, bool]]) -> None:
    n = len(pairs)
    observed = sum(human == judge for human, judge in pairs) / n
    human_rate = sum(human for human, _ in pairs) / n
    judge_rate = sum(judge for _, judge in pairs) / n
    chance = human_rate * judge_rate + (1 - human_rate) * (1 - judge_rate)

    kappa = cohen_kappa(Confusion.of(pairs))

    if chance == 1:
        assert kappa.value is None
    else:
        assert kappa.value is not None and -1 <= kappa.value <= 1
        assert kappa.value == pytest.approx((observed - chance) / (1 - chance), abs=1e-12)


# -- choosing the grader -----------------------------------------------------------------------


def test_the_only_grader_is_chosen() -> None:
    labels, trials = known()

    assert choose_grader(labels, trials) == "judge"


def test_the_only_judge_is_chosen_among_code_checks() -> None:
    trials = [
        make_trial(
            "q",
            0,
            Score.from_bool(True, name="contains('paris')"),
            judged(0.8, name="rubric", **{JUDGE_MODEL_KEY: "openai/gpt-4o-mini"}),
            Score(name="human", verdict=Verdict.UNKNOWN, pending=True),
        )
    ]

    assert choose_grader([label("q", 0, "pass")], trials) == "rubric"


def test_the_grader_the_labels_are_for_is_chosen() -> None:
    trials = [make_trial("q", 0, judged(0.8, name="a"), judged(0.8, name="b"))]

    assert choose_grader([label("q", 0, "pass", grader="b")], trials) == "b"


def test_several_graders_are_listed_when_none_can_be_chosen() -> None:
    trials = [make_trial("q", 0, Score.from_bool(True, name="contains('x')"), judged(0.8))]

    with pytest.raises(CalibrationError) as caught:
        choose_grader([label("q", 0, "pass")], trials)

    assert str(caught.value) == (
        "the labeled trials have several graders: contains('x'), judge; choose one with --grader"
    )
    with pytest.raises(CalibrationError, match="no scores of a grader"):
        choose_grader([label("q", 0, "pass")], [make_trial("q", 0)])


# -- output ------------------------------------------------------------------------------------


def test_text_and_json() -> None:
    labels, trials = known()
    labels.append(label("q", 9, "pass"))

    cal = calibrate(labels, trials, grader="judge", disagreements=2)

    assert cal.to_text() == snapshot("""\
grader 'judge' against human labels · run run-a
9 labels: 8 compared, 1 left out (1 trial not stored)

  spearman        0.400
  pearson         0.399
  mean abs error  0.362
  agreement       75.0%  (95% CI 40.9%–92.9%)
  Cohen's kappa   0.467

                judge pass  judge fail
  human pass             4           1
  human fail             1           2

largest disagreements (|judge − human|):
  0.80  judge 0.20 fail, human 1.00 pass  trialkit transcripts show 'run-a/q#7'
  0.70  judge 0.70 pass, human 0.00 fail  trialkit transcripts show 'run-a/q#6'
""")
    assert Calibration.model_validate_json(cal.to_json()) == cal
    assert json.loads(cal.to_json())["kappa"] == {"value": 14 / 30, "reason": None, "ci": None}


def test_missing_scipy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    labels, trials = known()
    monkeypatch.setitem(sys.modules, "scipy.stats", None)

    with pytest.raises(ImportError, match=r"pip install 'trialkit\[stats\]'"):
        calibrate(labels, trials, grader="judge")
