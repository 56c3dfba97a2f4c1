"""Judge calibration: how well one grader's scores agree with human labels on the same trials.

Each label is paired with the stored score of the grader on the labeled trial, joined on
(task_id, trial) and on run_id when the label names one. A pair where either side gave no
verdict (a judge error, `unknown` from the judge or from the human) is left out and counted.
On the rest: Spearman and Pearson correlations of the numbers, the mean absolute error, the
pass/fail agreement rate, Cohen's kappa, the 2x2 confusion matrix, and the largest
disagreements with the command that shows each transcript. A figure that cannot be computed
(too few pairs, a constant column) is undefined, with the reason, never 0.
"""

from __future__ import annotations

import math
import shlex
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from trialkit._record import Record
from trialkit.analysis._deps import require_stats, scipy_stats
from trialkit.consistency import JudgeConsistency, of_trials
from trialkit.labels import HUMAN, Label
from trialkit.metrics import wilson_interval
from trialkit.score import Score, Verdict
from trialkit.trial import Trial

CALIBRATION_SCHEMA_VERSION = 1
DEFAULT_DISAGREEMENTS = 10
JUDGE_MODEL_KEY = "judge_model"
"""The `Score.metadata` key where a judge records the model it asked: how a model-graded score
is told apart from a code check when no grader is named."""
LABELED_KEY = "labeled_at"
"""The `Score.metadata` key of a score that a human label replaced in the store (`trialkit
labels import`, `trialkit review`): that score is the reviewer's, no longer the grader's."""

TrialKey = tuple[str, str, int]
"""(run_id, task_id, trial index)."""


class CalibrationError(ValueError):
    """The labels and trials cannot be paired as asked: no grader chosen, an ambiguous label."""


class Statistic(Record):
    """A figure that may be undefined: then `value` is `None` and `reason` says why."""

    value: float | None = None
    reason: str | None = None
    """Why there is no value (e.g. "the human scores are all 1")."""
    ci: tuple[float, float] | None = None
    """The 95% confidence interval, for rates (Wilson)."""


class Confusion(Record):
    """The pass/fail verdicts of the compared pairs: the human's against the judge's."""

    human_pass_judge_pass: int = 0
    human_pass_judge_fail: int = 0
    human_fail_judge_pass: int = 0
    human_fail_judge_fail: int = 0

    @classmethod
    def of(cls, verdicts: Iterable[tuple[bool, bool]]) -> Confusion:
        """Count (human passed, judge passed) pairs."""
        counts = Counter(verdicts)
        return cls(
            human_pass_judge_pass=counts[True, True],
            human_pass_judge_fail=counts[True, False],
            human_fail_judge_pass=counts[False, True],
            human_fail_judge_fail=counts[False, False],
        )

    @property
    def total(self) -> int:
        return self.agreed + self.human_pass_judge_fail + self.human_fail_judge_pass

    @property
    def agreed(self) -> int:
        return self.human_pass_judge_pass + self.human_fail_judge_fail


class Excluded(Record):
    """Labels left out of the comparison, each counted once, under the first reason that
    applies (in the order of the fields)."""

    other_grader: int = 0
    """The label is for another grader."""
    other_run: int = 0
    """The label names another run than the one asked for."""
    not_stored: int = 0
    """The run has no such trial."""
    not_graded: int = 0
    """The trial has no score from the grader (e.g. the trial errored before grading)."""
    relabeled: int = 0
    """The grader's stored score was replaced by a human label, so it is not the grader's."""
    judge_error: int = 0
    judge_unknown: int = 0
    human_unknown: int = 0

    @property
    def total(self) -> int:
        return sum(self.model_dump().values())


class Disagreement(Record):
    """A compared trial where the judge and the human differ."""

    run_id: str
    task_id: str
    trial: int
    judge_score: float
    judge_verdict: Literal["pass", "fail"]
    human_score: float
    human_verdict: Literal["pass", "fail"]
    difference: float
    """|judge − human|."""
    rationale: str | None = None
    """The judge's."""
    comment: str | None = None
    """The reviewer's."""
    command: str
    """The command that shows the trial's transcript."""


class Calibration(Record):
    """A judge's scores against human labels: `to_text()` for people, `to_json()` for tools."""

    schema_version: int = CALIBRATION_SCHEMA_VERSION
    grader: str
    """The grader (score name) that was calibrated."""
    runs: list[str]
    """The runs whose trials the labels were matched to."""
    labels: int
    """Labels given: `pairs` plus every excluded one."""
    pairs: int
    """Labels compared with a judge's verdict."""
    excluded: Excluded
    spearman: Statistic
    pearson: Statistic
    mae: Statistic
    """Mean absolute error of the judge's scores against the human ones."""
    agreement: Statistic
    """Share of pairs with the same pass/fail verdict."""
    kappa: Statistic
    """Cohen's kappa on pass/fail: agreement beyond chance."""
    confusion: Confusion
    disagreements: list[Disagreement] = Field(default_factory=list)
    """The largest disagreements, largest first."""
    consistency: list[JudgeConsistency] = Field(default_factory=list)
    """When the grader is a judge asked several times on each output (`repeats`): how often
    its verdicts flipped on the same output, and how often its answers agree, over the trials
    read (one entry per rubric)."""

    def gate(self, *, min_kappa: float | None = None, max_mae: float | None = None) -> list[str]:
        """Why the calibration fails these thresholds; empty when it passes them. An undefined
        figure fails its threshold: it cannot show the judge is good enough."""
        reasons = []
        if min_kappa is not None:
            kappa = self.kappa
            if kappa.value is None:
                reasons.append(
                    f"Cohen's kappa is undefined ({kappa.reason}), so it cannot meet "
                    f"--min-kappa {min_kappa:g}"
                )
            elif kappa.value < min_kappa:
                reasons.append(
                    f"Cohen's kappa {kappa.value:.3f} is under --min-kappa {min_kappa:g}"
                )
        if max_mae is not None:
            mae = self.mae
            if mae.value is None:
                reasons.append(
                    f"the mean absolute error is undefined ({mae.reason}), so it "
                    f"cannot meet --max-mae {max_mae:g}"
                )
            elif mae.value > max_mae:
                reasons.append(
                    f"the mean absolute error {mae.value:.3f} is over --max-mae {max_mae:g}"
                )
        return reasons

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)

    def to_text(self) -> str:
        from trialkit.analysis._calibration_text import render_calibration

        return render_calibration(self)


@dataclass(frozen=True)
class _Pair:
    label: Label
    run_id: str
    score: Score

    @property
    def judge(self) -> float:
        if self.score.value is not None:
            return self.score.value
        return 1.0 if self.judge_passed else 0.0

    @property
    def human(self) -> float:
        if self.label.score is not None:
            return self.label.score
        return 1.0 if self.human_passed else 0.0

    @property
    def judge_passed(self) -> bool:
        return self.score.verdict is Verdict.PASS

    @property
    def human_passed(self) -> bool:
        return self.label.verdict == "pass"


def calibrate(
    labels: Iterable[Label],
    trials: Iterable[Trial],
    *,
    grader: str,
    run_id: str | None = None,
    disagreements: int = DEFAULT_DISAGREEMENTS,
) -> Calibration:
    """Compare the scores named `grader` in `trials` with human `labels`.

    The labels compared are those for `grader` (a reviewer's answer to the grader's own
    question); when there are none, those for `human` (the reviewer's own verdict); failing
    that, those of the only grader the labels name. The others count as `other_grader`. With
    `run_id`, a label that names no run is about that run, and one that names another run is
    left out. A judge score without a value counts as 1.0 for pass and 0.0 for fail, like a
    label without a score. Raises `CalibrationError` when no trial has a score of `grader`.
    """
    require_stats("judge calibration")
    given = list(labels)
    stored = list(trials)
    scores, runs_of = _index_scores(stored, grader)
    if stored and all(score is None for score in scores.values()):
        names = sorted({s.name for t in stored for s in t.scores})
        raise CalibrationError(
            f"no labeled trial has a score of grader {grader!r}; "
            f"their graders: {', '.join(names) or 'none'}"
        )
    used = _labels_for(given, grader)
    excluded: Counter[str] = Counter(other_grader=len(given) - len(used))
    pairs: list[_Pair] = []
    runs: set[str] = set()
    seen: set[TrialKey] = set()
    for label in used:
        if run_id is not None and label.run_id not in (None, run_id):
            excluded["other_run"] += 1
            continue
        key = _trial_key(label, run_id, runs_of)
        if key is None or key not in scores:
            excluded["not_stored"] += 1
            continue
        if key in seen:
            raise CalibrationError(f"trial {key[1]}#{key[2]} of run {key[0]} is labeled twice")
        seen.add(key)
        runs.add(key[0])
        score = scores[key]
        reason = _left_out(score, label)
        if reason:
            excluded[reason] += 1
        elif score is not None:
            pairs.append(_Pair(label, key[0], score))
    confusion = Confusion.of((p.human_passed, p.judge_passed) for p in pairs)
    judge, human = [p.judge for p in pairs], [p.human for p in pairs]
    stats = scipy_stats()
    return Calibration(
        grader=grader,
        runs=sorted(runs),
        labels=len(given),
        pairs=len(pairs),
        excluded=Excluded(**excluded),
        spearman=correlation(stats.spearmanr, judge, human),
        pearson=correlation(stats.pearsonr, judge, human),
        mae=_mean_absolute_error(judge, human),
        agreement=_agreement(confusion),
        kappa=cohen_kappa(confusion),
        confusion=confusion,
        disagreements=_largest_disagreements(pairs, disagreements),
        consistency=[c for c in of_trials(stored) if c.grader == grader],
    )


def choose_grader(labels: Iterable[Label], trials: Iterable[Trial]) -> str:
    """The grader to calibrate when none is named, among the graders that scored the trials
    (not human ones: pending or labeled scores, or `human`): the only one the labels are
    for; else the only judge (a score whose metadata names its `judge_model`); else the only
    grader. Raises `CalibrationError` listing the names when there is no single one."""
    graders: set[str] = set()
    judges: set[str] = set()
    for trial in trials:
        for score in trial.scores:
            if score.name == HUMAN or score.pending or LABELED_KEY in score.metadata:
                continue
            graders.add(score.name)
            if JUDGE_MODEL_KEY in score.metadata:
                judges.add(score.name)
    labeled = graders & {label.grader for label in labels}
    for candidates in (labeled, judges, graders):
        if len(candidates) == 1:
            return next(iter(candidates))
        if candidates:
            kind = "judges" if candidates is judges else "graders"
            raise CalibrationError(
                f"the labeled trials have several {kind}: {', '.join(sorted(candidates))}; "
                "choose one with --grader"
            )
    raise CalibrationError("the labeled trials have no scores of a grader to calibrate")


def cohen_kappa(confusion: Confusion) -> Statistic:
    """Cohen's kappa of a 2x2 confusion matrix: (p_o − p_e) / (1 − p_e), where p_o is the
    observed agreement and p_e the agreement expected by chance from each side's pass rate.
    Undefined without pairs, and when p_e = 1 (both sides gave one and the same verdict)."""
    n = confusion.total
    if n == 0:
        return Statistic(reason="no pairs to compare")
    human_pass = confusion.human_pass_judge_pass + confusion.human_pass_judge_fail
    judge_pass = confusion.human_pass_judge_pass + confusion.human_fail_judge_pass
    # In whole numbers, multiplied by n²: exact until the one division.
    chance = human_pass * judge_pass + (n - human_pass) * (n - judge_pass)
    if chance == n * n:
        verdict = "pass" if human_pass else "fail"
        return Statistic(reason=f"every verdict is {verdict}, so chance agreement is 1")
    return Statistic(value=(n * confusion.agreed - chance) / (n * n - chance))


def correlation(
    method: Callable[..., Any], judge: Sequence[float], human: Sequence[float]
) -> Statistic:
    """`method` (`scipy.stats.spearmanr` or `pearsonr`) of the two columns, or undefined with
    the reason: fewer than 2 pairs, or a constant column (scipy warns `ConstantInputWarning`
    and returns nan; the warning is caught here on purpose)."""
    if len(judge) < 2:
        return Statistic(reason=f"{_pairs(len(judge))}: a correlation needs at least 2")
    for who, column in (("the judge's scores", judge), ("the human scores", human)):
        if len(set(column)) == 1:
            return Statistic(reason=f"{who} are all {column[0]:g}")
    stats = scipy_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", stats.DegenerateDataWarning)
        value = float(method(judge, human).statistic)
    if not math.isfinite(value) or any(
        issubclass(w.category, stats.ConstantInputWarning) for w in caught
    ):
        return Statistic(reason="a column is constant")
    return Statistic(value=value)


def _index_scores(
    trials: Iterable[Trial], grader: str
) -> tuple[dict[TrialKey, Score | None], dict[tuple[str, int], set[str]]]:
    """Each trial's score from `grader` (`None` when it has none), and the runs of each
    (task, index), to place labels that name no run."""
    scores: dict[TrialKey, Score | None] = {}
    runs_of: dict[tuple[str, int], set[str]] = {}
    for trial in trials:
        found = (s for s in trial.scores if s.name == grader and not s.pending)
        scores[trial.run_id, trial.task_id, trial.index] = next(found, None)
        runs_of.setdefault((trial.task_id, trial.index), set()).add(trial.run_id)
    return scores, runs_of


def _labels_for(labels: list[Label], grader: str) -> list[Label]:
    named = sorted({label.grader for label in labels})
    for chosen in (grader, HUMAN, named[0] if len(named) == 1 else None):
        used = [label for label in labels if label.grader == chosen]
        if used:
            return used
    if not labels:
        return []
    raise CalibrationError(
        f"the labels are for several graders ({', '.join(named)}) and none is {grader!r} or "
        f"{HUMAN!r}: keep the labels of one grader"
    )


def _trial_key(
    label: Label, run_id: str | None, runs_of: dict[tuple[str, int], set[str]]
) -> TrialKey | None:
    run = label.run_id or run_id
    if run is None:
        runs = sorted(runs_of.get((label.task_id, label.trial), ()))
        if len(runs) > 1:
            raise CalibrationError(
                f"the label of {label.task_id}#{label.trial} names no run, and the trials of "
                f"several runs match it ({', '.join(runs)}): give the run"
            )
        if not runs:
            return None
        run = runs[0]
    return run, label.task_id, label.trial


def _left_out(score: Score | None, label: Label) -> str | None:
    if score is None:
        return "not_graded"
    if LABELED_KEY in score.metadata:
        return "relabeled"
    if score.verdict is Verdict.ERROR:
        return "judge_error"
    if score.verdict is Verdict.UNKNOWN:
        return "judge_unknown"
    if label.verdict == "unknown":
        return "human_unknown"
    return None


def _pairs(n: int) -> str:
    return f"{n} pair" if n == 1 else f"{n} pairs"


def _mean_absolute_error(judge: Sequence[float], human: Sequence[float]) -> Statistic:
    if not judge:
        return Statistic(reason="no pairs to compare")
    return Statistic(
        value=math.fsum(abs(j - h) for j, h in zip(judge, human, strict=True)) / len(judge)
    )


def _agreement(confusion: Confusion) -> Statistic:
    if confusion.total == 0:
        return Statistic(reason="no pairs to compare")
    return Statistic(
        value=confusion.agreed / confusion.total,
        ci=wilson_interval(confusion.agreed, confusion.total),
    )


def _largest_disagreements(pairs: Sequence[_Pair], limit: int) -> list[Disagreement]:
    differing = [p for p in pairs if p.judge != p.human or p.judge_passed != p.human_passed]
    differing.sort(
        key=lambda p: (
            -abs(p.judge - p.human),
            p.judge_passed == p.human_passed,
            p.run_id,
            p.label.task_id,
            p.label.trial,
        )
    )
    return [_disagreement(p) for p in differing[:limit]]


def _disagreement(pair: _Pair) -> Disagreement:
    task_id, index = pair.label.task_id, pair.label.trial
    ref = shlex.quote(f"{pair.run_id}/{task_id}#{index}")
    return Disagreement(
        run_id=pair.run_id,
        task_id=task_id,
        trial=index,
        judge_score=pair.judge,
        judge_verdict="pass" if pair.judge_passed else "fail",
        human_score=pair.human,
        human_verdict="pass" if pair.human_passed else "fail",
        difference=abs(pair.judge - pair.human),
        rationale=pair.score.rationale,
        comment=pair.label.comment,
        command=f"trialkit transcripts show {ref}",
    )
