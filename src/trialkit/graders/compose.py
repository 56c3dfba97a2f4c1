"""Graders made of graders; each part stays visible as a sub-assertion of the score."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from trialkit.graders.base import (
    GradeContext,
    Grader,
    GraderLike,
    as_grader,
    combine_verdicts,
    run_grader,
)
from trialkit.score import Score, Verdict


async def _grade_all(parts: Sequence[Grader], ctx: GradeContext) -> list[Score]:
    scores: list[Score | None] = [None] * len(parts)

    async def one(i: int, part: Grader) -> None:
        scores[i] = await run_grader(part, ctx)

    async with anyio.create_task_group() as tg:
        for i, part in enumerate(parts):
            tg.start_soon(one, i, part)
    return [s for s in scores if s is not None]


def _names(parts: Sequence[Grader]) -> str:
    return ", ".join(p.name for p in parts)


class _Composite(Grader):
    parts: list[Grader]

    def _init_parts(self, graders: Sequence[GraderLike], label: str) -> list[Grader]:
        if not graders:
            raise ValueError(f"{label}: needs at least one grader")
        return [as_grader(g) for g in graders]


class all_of(_Composite):
    """Passes when every part passes; its value is the mean of the parts' values."""

    def __init__(self, *graders: GraderLike, name: str | None = None) -> None:
        self.parts = self._init_parts(graders, "all_of")
        self._name = name

    @property
    def name(self) -> str:
        return self._name or f"all_of({_names(self.parts)})"

    async def grade(self, ctx: GradeContext) -> Score:
        scores = await _grade_all(self.parts, ctx)
        verdict = combine_verdicts([s.verdict for s in scores])
        failed = [s.name for s in scores if s.verdict is not Verdict.PASS]
        return Score(
            value=_mean([s.value for s in scores]),
            verdict=verdict,
            rationale=None if not failed else "not passed: " + ", ".join(failed),
            assertions=[s.as_assertion() for s in scores],
        )


class any_of(_Composite):
    """Passes when at least one part passes; errors only when no part passed and one errored."""

    def __init__(self, *graders: GraderLike, name: str | None = None) -> None:
        self.parts = self._init_parts(graders, "any_of")
        self._name = name

    @property
    def name(self) -> str:
        return self._name or f"any_of({_names(self.parts)})"

    async def grade(self, ctx: GradeContext) -> Score:
        scores = await _grade_all(self.parts, ctx)
        verdicts = {s.verdict for s in scores}
        if Verdict.PASS in verdicts:
            verdict = Verdict.PASS
        elif Verdict.ERROR in verdicts:
            verdict = Verdict.ERROR
        elif Verdict.UNKNOWN in verdicts:
            verdict = Verdict.UNKNOWN
        else:
            verdict = Verdict.FAIL
        values = [s.value for s in scores if s.value is not None]
        return Score(
            value=max(values) if values else None,
            verdict=verdict,
            rationale=None if verdict is Verdict.PASS else "no part passed",
            assertions=[s.as_assertion() for s in scores],
        )


class weighted(_Composite):
    """The weighted mean of the parts' values, passing at `pass_at`.

    ```python
    weighted((contains("paris"), 2.0), (not_contains("berlin"), 1.0), pass_at=0.6)
    ```
    A part that errors makes the whole score an error: a mean over missing values would lie.
    """

    def __init__(self, *items: tuple[GraderLike, float], pass_at: float = 1.0) -> None:
        if not items:
            raise ValueError("weighted: needs at least one (grader, weight) pair")
        for item in items:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise ValueError(f"weighted: expected (grader, weight) pairs, got {item!r}")
            if not item[1] >= 0:
                raise ValueError(f"weighted: weight must be >= 0, got {item[1]!r}")
        if sum(w for _, w in items) <= 0:
            raise ValueError("weighted: the weights sum to zero")
        if not 0.0 <= pass_at <= 1.0:
            raise ValueError(f"weighted: pass_at must be within [0, 1], got {pass_at}")
        self.items = list(items)
        self.parts = [as_grader(g) for g, _ in items]
        self.weights = [float(w) for _, w in items]
        self.pass_at = pass_at

    @property
    def name(self) -> str:
        return f"weighted({_names(self.parts)})"

    async def grade(self, ctx: GradeContext) -> Score:
        scores = await _grade_all(self.parts, ctx)
        assertions = [s.as_assertion() for s in scores]
        broken = [s for s in scores if s.verdict in (Verdict.ERROR, Verdict.UNKNOWN)]
        if broken:
            verdict = (
                Verdict.ERROR
                if any(s.verdict is Verdict.ERROR for s in broken)
                else Verdict.UNKNOWN
            )
            return Score(
                verdict=verdict,
                rationale="no weighted value: "
                + ", ".join(f"{s.name} is {s.verdict}" for s in broken),
                assertions=assertions,
            )
        total = sum(self.weights)
        value = (
            sum(
                w * (s.value if s.value is not None else float(s.passed))
                for s, w in zip(scores, self.weights, strict=True)
            )
            / total
        )
        score = Score.from_value(value, pass_at=self.pass_at)
        score.assertions = assertions
        if not score.passed:
            score.rationale = f"weighted value {value:.3f} is under {self.pass_at}"
        return score


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
