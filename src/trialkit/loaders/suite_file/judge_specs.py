"""Suite-file entries for the graders that judge: a model against a rubric, or a person.

```yaml
graders:
  - judge: "Names Paris and nothing false."       # a model grader (`--judge-model`)
  - judge: {rubric: Names Paris., pass_at: 0.7, must_fail: [Berlin.]}
  - human: "Is the tone polite?"                  # waits for a reviewer (`trialkit review`)
  - human: {name: tone, instructions: Is the tone polite?}
```
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from trialkit import graders
from trialkit.graders.base import GraderLike
from trialkit.graders.human import HUMAN
from trialkit.graders.judge import Control
from trialkit.graders.judge import judge as make_judge
from trialkit.loaders.errors import FieldPath
from trialkit.loaders.suite_file.context import BuildContext
from trialkit.loaders.suite_file.entry import GraderEntry
from trialkit.loaders.suite_file.fields import TEXT_SCHEMA, Fraction, Shorthand, Text
from trialkit.models.base import GenerationConfig

MAX_REPEATS = 100
"""The most times a suite file may ask a judge on one output."""


class ControlArgs(Shorthand):
    """A control output whose verdict is known; `- Berlin.` is the short form."""

    short_field = "output"
    short_schema = TEXT_SCHEMA
    output: Text
    """The output the judge grades."""
    input: str | None = None
    """The task input shown with it (a control belongs to no task)."""
    criteria: str | None = None
    reference: str | None = None


class JudgeArgs(Shorthand):
    """Arguments of `judge`; `judge: "Names Paris and nothing false."` is the short form."""

    short_field = "rubric"
    rubric: str
    """What the output must do, in prose, for the judge model."""
    pass_at: Fraction | None = None
    """Ask for a score in [0, 1] passing at this value; without it the judge says pass or fail."""
    model: str | None = None
    """The judge's model (provider/name); otherwise `--judge-model`."""
    protocol: Literal["auto", "json", "tool", "text"] = "auto"
    """How the judge answers: a JSON Schema response, a forced tool call, a `SCORE:` line, or
    `auto` (the first the model supports)."""
    include: list[Literal["input", "criteria", "reference", "tool_calls", "diff"]] | None = None
    """What the judge is shown besides the output (default: input, criteria, reference)."""
    must_fail: list[ControlArgs] | None = None
    """Negative controls: outputs the judge must fail, or every score of it is an error."""
    must_pass: list[ControlArgs] | None = None
    """Positive controls: outputs the judge must pass, or every score of it is an error."""
    config: GenerationConfig | None = None
    """Generation parameters for the judge (temperature 0 unless set here)."""
    repeats: Annotated[int, Field(strict=True, ge=1, le=MAX_REPEATS)] = 1
    """Ask the judge this many times on each output: the score keeps every answer, its
    verdict is their majority (a tie is unknown), and reports give how often they flip."""


class Judge(GraderEntry):
    """A model grades the output against a rubric; its controls (`must_fail`, `must_pass`)
    check it first."""

    name = "judge"
    judge: JudgeArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.judge
        must_fail, must_pass = (
            [Control(c.output, c.input, c.criteria, c.reference) for c in controls]
            for controls in (a.must_fail or [], a.must_pass or [])
        )
        options: dict[str, Any] = {} if a.include is None else {"include": a.include}
        return self._make(
            ctx,
            path,
            make_judge,
            a.rubric,
            pass_at=a.pass_at,
            model=a.model,
            protocol=a.protocol,
            must_fail=must_fail,
            must_pass=must_pass,
            config=a.config,
            repeats=a.repeats,
            **options,
        )


class HumanArgs(Shorthand):
    """Arguments of `human`; `human: "Is the tone polite?"` is the short form, and `human:`
    alone asks for a verdict with no instructions."""

    short_field = "instructions"
    allow_null = True
    name: str = HUMAN
    """The check's name, as a label names it (`trialkit review`, `trialkit labels`)."""
    instructions: str | None = None
    """What the reviewer should look for; shown with the task's criteria and reference."""


class Human(GraderEntry):
    """A person's verdict, asked for after the run: the trial stays pending (verdict
    `unknown`) until a reviewer labels it."""

    name = "human"
    human: HumanArgs

    def build(self, ctx: BuildContext, path: FieldPath) -> GraderLike | None:
        a = self.human
        return self._make(ctx, path, graders.human, a.name, a.instructions)
