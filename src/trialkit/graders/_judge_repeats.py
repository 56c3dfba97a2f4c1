"""A judge asked several times on the same output (`judge(..., repeats=N)`): one score from
its answers, and how consistent the answers were.

The score keeps every answer (`metadata["answers"]`). Its verdict is the majority of the
answers that decided (pass or fail); a tie between pass and fail is `unknown` (the judge
cannot tell, and says so), and answers that errored or said unknown do not vote. With no
vote the score is `unknown` when some answer said unknown, else the first answer's error. The
value is the median of the voting answers' values: with a majority it lies on the majority's
side of `pass_at`, so value and verdict agree.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from trialkit.score import Score, Verdict

ANSWERS_KEY = "answers"
"""The `Score.metadata` key of a repeated judge's answers, one dict per time it was asked."""
REPEATS_KEY = "repeats"
"""The `Score.metadata` key of how many times the judge was asked."""
RUBRIC_KEY = "rubric"
"""The `Score.metadata` key of the rubric of a repeated judge (flip rates are per rubric)."""


def answer_record(score: Score) -> dict[str, Any]:
    """One answer as the score's metadata keeps it."""
    record: dict[str, Any] = {"verdict": score.verdict.value, "value": score.value}
    if score.error is not None:
        record["error"] = f"{score.error.type}: {score.error.message}"[:500]
    elif score.rationale:
        record["rationale"] = score.rationale[:500]
    return record


def combine_answers(answers: Sequence[Score], *, pass_at: float, rubric: str) -> Score:
    """The score of a judge asked `len(answers)` times on one output (see the module doc)."""
    passed = [a for a in answers if a.verdict is Verdict.PASS]
    failed = [a for a in answers if a.verdict is Verdict.FAIL]
    metadata = {
        **_shared_metadata(answers),
        RUBRIC_KEY: rubric,
        REPEATS_KEY: len(answers),
        ANSWERS_KEY: [answer_record(a) for a in answers],
    }
    tally = f"{len(passed)} pass, {len(failed)} fail of {len(answers)} answers"
    unknown = sum(a.verdict is Verdict.UNKNOWN for a in answers)
    errors = sum(a.verdict is Verdict.ERROR for a in answers)
    if unknown or errors:
        tally += f" ({unknown} unknown, {errors} errors: they do not vote)"
    if not passed and not failed:
        if unknown:
            return Score(verdict=Verdict.UNKNOWN, rationale=tally, metadata=metadata)
        first = answers[0]
        return Score(
            verdict=Verdict.ERROR, rationale=first.rationale, error=first.error, metadata=metadata
        )
    if len(passed) == len(failed):
        return Score(
            verdict=Verdict.UNKNOWN,
            rationale=f"the answers are split, {tally}: a tie is unknown",
            metadata=metadata,
        )
    majority = passed if len(passed) > len(failed) else failed
    values = [_value(a) for a in (*passed, *failed)]
    score = Score.from_value(statistics.median(values), pass_at=pass_at)
    why = majority[0].rationale
    score.rationale = f"{tally}: {why}" if why else tally
    score.metadata = metadata
    return score


def _value(score: Score) -> float:
    if score.value is not None:
        return score.value
    return 1.0 if score.verdict is Verdict.PASS else 0.0


def _shared_metadata(answers: Sequence[Score]) -> dict[str, Any]:
    """What every answer's metadata says alike (the judge model, protocol, controls...)."""
    first = dict(answers[0].metadata)
    return {k: v for k, v in first.items() if all(a.metadata.get(k) == v for a in answers)}
