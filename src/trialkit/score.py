"""Scores, verdicts and assertions: what graders produce."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from trialkit._record import ErrorInfo, Record

SCORE_SCHEMA_VERSION = 1


class Verdict(StrEnum):
    """The outcome of a check.

    `fail` means the check ran and the agent did not satisfy it; `error` means no verdict was
    possible (a crash, a timeout, an unparseable judge answer); `unknown` means a judge said it
    cannot tell.
    """

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    UNKNOWN = "unknown"


class Assertion(Record):
    """One named check inside a score; composite graders keep each part as a sub-assertion."""

    name: str
    verdict: Verdict
    value: float | None = None
    rationale: str | None = None
    assertions: list[Assertion] = Field(default_factory=list)
    """Sub-assertions, for checks made of parts."""


class Score(Record):
    """What one grader said about one trial."""

    schema_version: int = SCORE_SCHEMA_VERSION
    name: str = ""
    """The grader's name (filled in by the runner when the grader left it empty)."""
    value: float | None = None
    """A number in [0, 1], or `None` when the check has no numeric value."""
    verdict: Verdict = Verdict.PASS
    rationale: str | None = None
    """Why: the grader's explanation, shown in reports."""
    assertions: list[Assertion] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    """For verdict `error`: the exception or reason."""
    pending: bool = False
    """True while the score waits for a human reviewer."""

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @classmethod
    def from_bool(cls, ok: bool, *, name: str = "", rationale: str | None = None) -> Score:
        return cls(
            name=name,
            value=1.0 if ok else 0.0,
            verdict=Verdict.PASS if ok else Verdict.FAIL,
            rationale=rationale,
        )

    @classmethod
    def from_value(
        cls, value: float, *, pass_at: float = 1.0, name: str = "", rationale: str | None = None
    ) -> Score:
        """A score from a number: clamped to [0, 1], passing at `pass_at` or above."""
        clamped = min(1.0, max(0.0, float(value)))
        verdict = Verdict.PASS if clamped >= pass_at else Verdict.FAIL
        return cls(name=name, value=clamped, verdict=verdict, rationale=rationale)

    @classmethod
    def from_error(cls, error: ErrorInfo, *, name: str = "") -> Score:
        return cls(name=name, verdict=Verdict.ERROR, error=error, rationale=error.summary())

    def as_assertion(self) -> Assertion:
        return Assertion(
            name=self.name,
            verdict=self.verdict,
            value=self.value,
            rationale=self.rationale,
            assertions=self.assertions,
        )
