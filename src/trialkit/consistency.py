"""Judge consistency: how often a judge asked several times on the same output
(`judge(..., repeats=N)`) gives different verdicts.

Per judge (the score's name) and rubric: `judged`, the outputs with at least two answers
that gave a verdict (pass, fail or unknown; an errored answer gave none); `flipped`, those
whose answers disagree; the flip rate `flipped / judged`; and the agreement, the share of
pairs of answers on the same output that agree (pooled over outputs). A run keeps them in
its config (`judge_consistency`), so reports, `trialkit calibrate` and `trialkit health` read
them without loading transcripts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import computed_field

from trialkit._record import Record
from trialkit.score import Score
from trialkit.trial import Trial

_COMPUTED = {"flip_rate", "agreement"}
CONFIG_KEY = "judge_consistency"
"""The key of the run config that holds each repeated judge's consistency."""
ANSWERS_KEY = "answers"
RUBRIC_KEY = "rubric"
VERDICTS = ("pass", "fail", "unknown")


class JudgeConsistency(Record):
    """How consistent one judge (with one rubric) was on the outputs it was asked about
    several times."""

    grader: str
    """The judge's score name."""
    rubric: str | None = None
    judge_model: str | None = None
    repeats: int = 0
    """The most times it was asked on one output."""
    judged: int = 0
    """Outputs with at least two answers that gave a verdict."""
    flipped: int = 0
    """Of those, the outputs whose answers disagree."""
    pairs: int = 0
    """Pairs of answers with a verdict on the same output."""
    pairs_agreed: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def flip_rate(self) -> float | None:
        """`flipped / judged`; None when no output was judged twice."""
        return self.flipped / self.judged if self.judged else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def agreement(self) -> float | None:
        """The share of pairs of answers on the same output that agree; None with no pair."""
        return self.pairs_agreed / self.pairs if self.pairs else None

    def key(self) -> tuple[str, str | None]:
        return (self.grader, self.rubric)

    def merged(self, other: JudgeConsistency) -> JudgeConsistency:
        return self.model_copy(
            update={
                "judge_model": self.judge_model or other.judge_model,
                "repeats": max(self.repeats, other.repeats),
                "judged": self.judged + other.judged,
                "flipped": self.flipped + other.flipped,
                "pairs": self.pairs + other.pairs,
                "pairs_agreed": self.pairs_agreed + other.pairs_agreed,
            }
        )

    def line(self) -> str:
        """One line for people."""
        if self.flip_rate is None:
            return f"{self.grader}: asked {self.repeats} times, but no output had two verdicts"
        agreement = self.agreement
        shown = "n/a" if agreement is None else f"{agreement:.1%}"
        return (
            f"{self.grader}: asked {self.repeats} times per output; verdicts flipped on "
            f"{self.flipped} of {self.judged} outputs ({self.flip_rate:.1%}), "
            f"answers agree {shown}"
        )


def of_score(score: Score) -> JudgeConsistency | None:
    """The consistency one repeated judge's score shows (None for other scores)."""
    answers = score.metadata.get(ANSWERS_KEY)
    if not isinstance(answers, list) or len(answers) < 2:
        return None
    verdicts = [a.get("verdict") for a in answers if isinstance(a, dict)]
    decided = [v for v in verdicts if v in VERDICTS]
    n = len(decided)
    agreed = sum(decided.count(v) * (decided.count(v) - 1) // 2 for v in VERDICTS)
    rubric = score.metadata.get(RUBRIC_KEY)
    model = score.metadata.get("judge_model")
    return JudgeConsistency(
        grader=score.name,
        rubric=rubric if isinstance(rubric, str) else None,
        judge_model=model if isinstance(model, str) else None,
        repeats=len(answers),
        judged=int(n >= 2),
        flipped=int(n >= 2 and len(set(decided)) > 1),
        pairs=n * (n - 1) // 2,
        pairs_agreed=agreed,
    )


class ConsistencyTally:
    """Adds up the judges' consistency over trials, as they finish."""

    def __init__(self, previous: Iterable[JudgeConsistency] = ()) -> None:
        self._by_key: dict[tuple[str, str | None], JudgeConsistency] = {}
        for item in previous:
            self._add(item)

    def add_trial(self, trial: Trial) -> None:
        for score in trial.scores:
            found = of_score(score)
            if found is not None:
                self._add(found)

    def _add(self, item: JudgeConsistency) -> None:
        kept = self._by_key.get(item.key())
        self._by_key[item.key()] = item if kept is None else kept.merged(item)

    def results(self) -> list[JudgeConsistency]:
        return [self._by_key[k] for k in sorted(self._by_key, key=lambda k: (k[0], k[1] or ""))]

    def __bool__(self) -> bool:
        return bool(self._by_key)


def of_trials(trials: Iterable[Trial]) -> list[JudgeConsistency]:
    """Each repeated judge's consistency over `trials`."""
    tally = ConsistencyTally()
    for trial in trials:
        tally.add_trial(trial)
    return tally.results()


def to_config(items: Sequence[JudgeConsistency]) -> list[dict[str, Any]]:
    """As the run config keeps them."""
    return [item.model_dump(mode="json", exclude=_COMPUTED) for item in items]


def from_config(config: Mapping[str, Any]) -> list[JudgeConsistency]:
    """The consistency a run's config keeps (none when no judge was repeated)."""
    value = config.get(CONFIG_KEY)
    if not isinstance(value, list):
        return []
    found = []
    for item in value:
        try:
            found.append(JudgeConsistency.model_validate(item))
        except ValueError:
            continue  # changed behind trialkit's back: left out rather than guessed
    return found


def consistency_notes(config: Mapping[str, Any]) -> list[str]:
    """Lines for reports: each repeated judge's flip rate and agreement."""
    return [f"Judge consistency: {item.line()}" for item in from_config(config)]


def summary_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON report summary's `judge_consistency` (only when a judge was repeated): per
    judge and rubric, its counts, `flip_rate` and `agreement`."""
    items = from_config(config)
    if not items:
        return {}
    return {CONFIG_KEY: [item.model_dump(mode="json") for item in items]}
