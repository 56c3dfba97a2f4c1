"""`human`: a check only a person can make, left pending until someone labels the trial.

A task tagged `review` gets one `human()` grader on top of its own (see `with_review`). Its
score has verdict `unknown` and `pending=True`, so the trial is never reported as a pass before
a reviewer said so, while a failed or errored check elsewhere still shows as fail or error.
`trialkit review RUN` (or `trialkit labels import`) replaces the pending score with the label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trialkit.graders.base import GradeContext, Grader
from trialkit.score import Score, Verdict

if TYPE_CHECKING:
    from trialkit.task import Task

REVIEW_TAG = "review"
"""The tag that marks a task for human review."""
HUMAN = "human"
"""The name of the grader a `review` tag adds, and the default grader of a label."""
PENDING_RATIONALE = "waiting for a human reviewer (trialkit review)"


@dataclass(init=False)
class human(Grader):
    """A human reviewer's verdict, asked for after the run.

    The score stays pending (verdict `unknown`) until a label arrives. `instructions` tell the
    reviewer what to look for; they are kept with the score, next to the task's success
    criteria and reference answer, because the review happens later, from the store alone.

    ```python
    Task(id="tone", input="Decline politely.", graders=[human(instructions="Polite? Clear?")])
    ```
    """

    instructions: str | None
    _name: str = field(repr=False)

    def __init__(self, name: str = HUMAN, instructions: str | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("human: name must be a non-empty string")
        self._name, self.instructions = name, instructions

    @property
    def name(self) -> str:
        return self._name

    def grade(self, ctx: GradeContext) -> Score:
        return pending_score(
            self._name,
            instructions=self.instructions,
            criteria=ctx.task.criteria,
            reference=ctx.task.reference,
        )


def pending_score(
    name: str = HUMAN,
    *,
    instructions: str | None = None,
    criteria: str | None = None,
    reference: str | None = None,
) -> Score:
    """The score of a check that waits for a reviewer: `unknown`, pending, with what the
    reviewer needs to know in its metadata (only the keys that have a value)."""
    shown = {"instructions": instructions, "criteria": criteria, "reference": reference}
    return Score(
        name=name,
        verdict=Verdict.UNKNOWN,
        rationale=PENDING_RATIONALE,
        pending=True,
        metadata={key: value for key, value in shown.items() if value is not None},
    )


def marked_for_review(tags: Sequence[str]) -> bool:
    """Whether a task with these tags waits for a human reviewer."""
    return REVIEW_TAG in tags


def with_review(graders: Sequence[Grader], task: Task) -> list[Grader]:
    """`graders`, plus a `human()` grader when `task` is tagged `review` and has none named
    "human" already: what the runner grades such a task with."""
    chosen = list(graders)
    if marked_for_review(task.tags) and not any(g.name == HUMAN for g in chosen):
        chosen.append(human())
    return chosen
