from trialkit import GradeContext, Outcome, Task, Transcript


def make_ctx(
    output: str | None = "",
    *,
    failed: bool = False,
    failure: str | None = None,
    reference: str | None = None,
) -> GradeContext:
    return GradeContext(
        task=Task(id="t", input="question", reference=reference),
        trial_index=0,
        transcript=Transcript(),
        outcome=Outcome(output=output, failed=failed, failure=failure),
    )
