"""`duration`: grade how long the work took, but only work that was actually delivered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trialkit._record import ErrorInfo
from trialkit.graders.base import GradeContext, Grader, GraderLike, as_grader, run_grader
from trialkit.score import Score, Verdict
from trialkit.transcript import Timing

NOT_DELIVERED = "not delivered: the time of work that was not produced is not graded"

Measure = Literal["trial", "agent"]


def measured_seconds(timing: Timing, measure: Measure) -> float:
    """The wall time `duration` grades.

    `agent`: the agent phase (`timing.agent_s`). `trial`: `timing.total_s` when it is recorded
    (a stored trial being re-graded); while the trial itself is being graded the total is not
    known yet, so it is setup + agent + capture, everything before grading.
    """
    if measure == "agent":
        return timing.agent_s
    if timing.total_s > 0:
        return timing.total_s
    return timing.setup_s + timing.agent_s + timing.capture_s


@dataclass(init=False)
class duration(Grader):
    """The work took at most `target_seconds` of wall time, and was delivered.

    Passes (1.0) at or under the target. With a `budget_seconds` above the target, a time
    between the two scores linearly from 1 down to 0 (a failing partial score); at or over the
    budget, or over the target without a budget, it scores 0.

    `delivered` proves the timed thing was produced: a grader (e.g. `file_exists("out.csv")`)
    or a function of the `GradeContext` (sync or async) returning a bool, a float or a `Score`.
    Unless it passes, the verdict is *fail*, whatever the time, so an agent that quickly did
    nothing cannot pass a timing check. `measure` is `"trial"` (default) or `"agent"`; see
    `measured_seconds`.
    """

    target_seconds: float
    budget_seconds: float | None
    delivered: GraderLike
    measure: Measure

    def __init__(
        self,
        target_seconds: float,
        budget_seconds: float | None = None,
        *,
        delivered: GraderLike,
        measure: Measure = "trial",
    ) -> None:
        if not target_seconds >= 0:
            raise ValueError(f"duration: target_seconds must be >= 0, got {target_seconds}")
        if budget_seconds is not None and not budget_seconds > target_seconds:
            raise ValueError(
                f"duration: budget_seconds ({budget_seconds}) must be above "
                f"target_seconds ({target_seconds})"
            )
        if measure not in ("trial", "agent"):
            raise ValueError(f"duration: measure must be 'trial' or 'agent', got {measure!r}")
        self._delivered = as_grader(delivered)  # TypeError for a non-callable
        self.target_seconds = target_seconds
        self.budget_seconds = budget_seconds
        self.delivered = delivered
        self.measure = measure

    @property
    def name(self) -> str:
        budget = "" if self.budget_seconds is None else f", {self.budget_seconds:g}"
        return f"duration({self.target_seconds:g}{budget}, {self.measure})"

    async def grade(self, ctx: GradeContext) -> Score:
        proof = await run_grader(self._delivered, ctx)
        if proof.verdict is Verdict.ERROR:
            error = proof.error or ErrorInfo(type="Error", message=proof.rationale or "")
            return Score(
                verdict=Verdict.ERROR,
                error=error,
                rationale=f"the delivered check ({proof.name}) errored: {error.summary()}",
            )
        if not proof.passed:
            why = NOT_DELIVERED
            if proof.rationale:
                why += f" ({proof.name}: {proof.rationale})"
            return Score.from_bool(False, rationale=why)
        seconds = measured_seconds(ctx.transcript.timing, self.measure)
        took = f"{self.measure} took {seconds:.2f} s"
        if seconds <= self.target_seconds:
            return Score.from_bool(True, rationale=f"{took} (target {self.target_seconds:g} s)")
        if self.budget_seconds is None or seconds >= self.budget_seconds:
            limit = (
                f"target {self.target_seconds:g} s"
                if self.budget_seconds is None
                else f"budget {self.budget_seconds:g} s"
            )
            return Score.from_bool(False, rationale=f"{took}, over the {limit}")
        value = (self.budget_seconds - seconds) / (self.budget_seconds - self.target_seconds)
        return Score.from_value(
            value,
            rationale=f"{took}, over the target {self.target_seconds:g} s "
            f"(budget {self.budget_seconds:g} s)",
        )
