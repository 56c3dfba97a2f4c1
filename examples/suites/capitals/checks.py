"""Custom graders, named in suite.yaml by import path (`python: checks:one_paragraph`)."""

from __future__ import annotations

from trialkit import GradeContext, Grader, Score


def one_paragraph(ctx: GradeContext) -> bool:
    """The answer is a single paragraph."""
    return "\n\n" not in ctx.output.strip()


class at_most(Grader):  # lower case: graders read like the check
    """The answer is at most `chars` characters long (`python: {ref: ..., args: {chars: 80}}`)."""

    def __init__(self, chars: int) -> None:
        self.chars = chars

    @property
    def name(self) -> str:
        return f"at_most({self.chars})"

    def grade(self, ctx: GradeContext) -> Score:
        length = len(ctx.output)
        return Score.from_bool(length <= self.chars, rationale=f"{length} characters")
