"""A later run (B) against the baseline (A): the two questions of docs/statistics.md.

"Did the agent change on these tasks?" decides `outcome`, which is what `compare
--fail-on-regression`, `run --baseline` and the GitHub helper gate on. The tasks are fixed and
the trials are the sample: the exact stratified test of `stats` over every task with decided
trials in both runs (trials as units within each task), two-sided at α = 1 − confidence; B is
`worse` when p < α and B passed fewer trials than expected. Each task's own change is tested
with Fisher's exact test, Holm-adjusted over the tasks tested, to name the tasks that changed.

"Is the agent better or worse at tasks like these?" is `suite_outcome`. The tasks are a sample:
each task's pass rate difference is one observation; their mean is `difference`, with its t
interval and the exact sign-flip test. With n tasks no test over tasks can reach p < 2/2^n,
so with 5 or fewer tasks at 95% the answer is `too_few_tasks`.

McNemar's exact test on task verdicts stays as a further figure (`mcnemar_p_value`). Every task
left out of the gate's test is listed in `left_out` with the reason, and in the conclusion.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

from trialkit._record import Record
from trialkit.analysis._significance import mcnemar_exact
from trialkit.analysis.planning import (
    detectable_task_change,
    detectable_trial_change,
    fewest_tasks,
)
from trialkit.analysis.stats import (
    Table,
    cmh_statistic,
    fisher_exact,
    holm,
    paired_t,
    sign_flip_test,
    stratified_exact_test,
)
from trialkit.report import Report, TaskReport
from trialkit.score import Verdict

Change = Literal["unchanged", "new_failure", "fixed", "error", "unknown", "added", "removed"]
Outcome = Literal["worse", "better", "no_difference", "cannot_tell"]
SuiteOutcome = Literal["worse", "better", "no_difference", "too_few_tasks", "cannot_tell"]


class TaskTest(Record):
    """One task's own change of pass rate: Fisher's exact test of its trials."""

    id: str
    passed_a: int
    decided_a: int
    passed_b: int
    decided_b: int
    p_value: float
    adjusted_p_value: float
    """Holm-adjusted over `TrialTest.task_tests`."""
    significant: bool
    """`adjusted_p_value` < α."""


class TrialTest(Record):
    """The gate's test: the exact stratified (Cochran–Mantel–Haenszel) test over tasks."""

    tasks: int
    """Tasks with decided trials in both runs (the test's strata)."""
    informative_tasks: int
    """Of them, those whose trials can tell the runs apart (not all passed or all failed in
    both)."""
    passed_b: int
    """B's passed trials over the informative tasks."""
    expected_b: float
    """B's passed trials over them expected if nothing changed."""
    p_value: float
    """Two-sided, exact."""
    p_lower: float
    """One-sided: that B passed this few or fewer."""
    exact: bool = True
    """Computed exactly; else by its normal approximation (past a few hundred tasks that can
    vary, where the two agree)."""
    cmh_statistic: float | None
    cmh_p_value: float | None
    """The large-sample chi-squared of the same test, for reference."""
    task_tests: list[TaskTest]
    """Per informative task, most changed first."""
    detectable: float | None
    """The smallest change of every task's pass rate this could detect at 80% power."""


class TaskLevelTest(Record):
    """Tasks like these: the paired difference over tasks."""

    tasks: int
    changed_tasks: int
    """Tasks whose pass rate differs between the runs."""
    sign_flip_p_value: float
    exact: bool
    """Enumerated; else `resamples` seeded random sign flips."""
    resamples: int
    """Random sign flips drawn when not `exact`; 0 when exact."""
    smallest_p: float
    """The smallest p-value the sign-flip test can give over these tasks: 2/2^changed_tasks."""
    t_p_value: float | None
    """Student's paired t-test; `null` when every task changed by the same amount."""
    detectable: float | None
    """The smallest mean difference over tasks this could detect at 80% power; `null` when
    the tasks are too few for any test over tasks to reach α."""


class LeftOut(Record):
    """A task of either run that the gate's test does not cover."""

    id: str
    reason: str
    """`unknown in A, fail 0/3 in B: not compared`."""


class PairedComparison(Record):
    """A later run (`candidate`) against the baseline, over the tasks both planned."""

    baseline: str
    candidate: str
    paired_tasks: int
    """Tasks both runs planned."""
    added: list[str]
    """Tasks only the candidate planned (not in the statistics)."""
    removed: list[str]
    """Tasks only the baseline planned (not in the statistics)."""
    left_out: list[LeftOut]
    """Every task not in the gate's test and why, with its state in each run: no decided trial
    in a run (`unknown in A, fail 0/3 in B`), or in one run only (`not in A, fail 0/3 in B`)."""
    new_failures: list[str]
    """Tasks the baseline passed and the candidate failed."""
    fixed: list[str]
    """Tasks the baseline failed and the candidate passed."""
    error_tasks: list[str]
    """Tasks whose verdict is error in either run: not in the McNemar test."""
    unknown_tasks: list[str]
    """Tasks whose verdict is unknown in either run (and error in neither): not in it either."""
    decided_tasks: int
    """Tasks that passed or failed in both runs: what the McNemar test looks at."""
    mcnemar_p_value: float | None
    """Exact McNemar on task verdicts; 1 when no task changed, `null` when none is decided."""
    rate_tasks: int
    """Tasks with decided trials in both runs: what the tests and pass rates cover."""
    pass_rate_baseline: float | None
    """The mean over `rate_tasks` of the baseline's task pass rates."""
    pass_rate_candidate: float | None
    difference: float | None
    """The mean over `rate_tasks` of each task's pass rate difference, candidate − baseline."""
    difference_ci: tuple[float, float] | None
    """Student's t interval of `difference` over tasks, at `confidence` (tasks like these),
    kept within [−1, 1]; `null` under 2 tasks."""
    trial_test: TrialTest | None
    """Did the agent change on these tasks? `null` when no task has decided trials in both."""
    task_test: TaskLevelTest | None
    """Is it better or worse at tasks like these? `null` when no task is in both."""
    confidence: float
    resamples: int
    seed: int
    outcome: Outcome
    """The gate: `worse` or `better` when the exact stratified test gives p < 1 − confidence
    in that direction, or a task on its own is significantly worse (better) by Fisher's exact
    test, Holm-adjusted; `no_difference` when not, `cannot_tell` when nothing can be tested."""
    suite_outcome: SuiteOutcome
    """Tasks like these: `worse`/`better` when the sign-flip test over tasks gives p < α,
    `too_few_tasks` when no test over these tasks can, else `no_difference`."""
    conclusion: str
    """The gate's outcome in plain sentences, with every task left out of the test (filled
    by `trialkit.analysis.conclusion`)."""
    suite_conclusion: str
    """The answer for tasks like these, in one sentence."""
    mean_score_delta: float | None = None
    """Whole runs (every task of each): candidate minus baseline."""
    cost_per_trial_delta: float | None = None
    latency_p50_delta_s: float | None = None


def change_of(baseline: TaskReport | None, candidate: TaskReport | None) -> Change:
    """How a task's verdict changed between two runs (`None`: the run lacks the task)."""
    if baseline is None:
        return "added"
    if candidate is None:
        return "removed"
    verdicts = {baseline.verdict, candidate.verdict}
    if Verdict.ERROR in verdicts:
        return "error"
    if Verdict.UNKNOWN in verdicts:
        return "unknown"
    if baseline.verdict is candidate.verdict:
        return "unchanged"
    return "new_failure" if candidate.verdict is Verdict.FAIL else "fixed"


def state(task: TaskReport) -> str:
    """`fail 0/3`: a task's verdict and its passed of decided trials, with what else ran."""
    shown = task.verdict.value + (f" {task.passed}/{task.decided}" if task.decided else "")
    extra = [
        f"{n} {'trial' if n == 1 else 'trials'} {word}"
        for n, word in ((task.errors, "errored"), (task.unknown, "unknown"))
        if n
    ]
    if not task.decided and extra:
        shown += f" ({', '.join(extra)})"
    return shown


def compare_pair(
    a: Report,
    b: Report,
    labels: tuple[str, str],
    *,
    confidence: float,
    resamples: int,
    seed: int,
    whole: tuple[float | None, float | None, float | None],
) -> PairedComparison:
    """`b` (labelled `labels[1]`) against `a`; `whole` are the whole-run deltas of mean score,
    cost per trial and latency p50."""
    label_a, label_b = labels
    tasks_a = {t.id: t for t in a.tasks}
    tasks_b = {t.id: t for t in b.tasks}
    paired = [(tasks_a[t.id], t) for t in b.tasks if t.id in tasks_a]
    changes = {ta.id: change_of(ta, tb) for ta, tb in paired}

    def having(change: Change) -> list[str]:
        return [task for task, c in changes.items() if c == change]

    new_failures, fixed = having("new_failure"), having("fixed")
    decided = sum(c in ("unchanged", "new_failure", "fixed") for c in changes.values())
    rated = [(ta, tb) for ta, tb in paired if ta.decided and tb.decided]
    left_out = [
        LeftOut(id=ta.id, reason=f"{state(ta)} in {label_a}, {state(tb)} in {label_b}")
        for ta, tb in paired
        if not (ta.decided and tb.decided)
    ]
    left_out += [
        LeftOut(id=t.id, reason=f"not in {label_a}, {state(t)} in {label_b}")
        for t in b.tasks
        if t.id not in tasks_a
    ]
    left_out += [
        LeftOut(id=t.id, reason=f"{state(t)} in {label_a}, not in {label_b}")
        for t in a.tasks
        if t.id not in tasks_b
    ]
    tables = [Table(ta.passed, ta.decided, tb.passed, tb.decided) for ta, tb in rated]
    trial_test = _trial_test([ta.id for ta, _ in rated], tables, confidence)
    fractions = [
        Fraction(tb.passed, tb.decided) - Fraction(ta.passed, ta.decided) for ta, tb in rated
    ]
    task_test = _task_test(fractions, tables, confidence, resamples, seed)
    differences = [float(d) for d in fractions]
    interval = paired_t(differences, confidence)
    n = len(rated)
    pair = PairedComparison(
        baseline=label_a,
        candidate=label_b,
        paired_tasks=len(paired),
        added=[t.id for t in b.tasks if t.id not in tasks_a],
        removed=[t.id for t in a.tasks if t.id not in tasks_b],
        left_out=left_out,
        new_failures=new_failures,
        fixed=fixed,
        error_tasks=having("error"),
        unknown_tasks=having("unknown"),
        decided_tasks=decided,
        mcnemar_p_value=mcnemar_exact(len(new_failures), len(fixed)) if decided else None,
        rate_tasks=n,
        pass_rate_baseline=_mean([ta.passed / ta.decided for ta, _ in rated]),
        pass_rate_candidate=_mean([tb.passed / tb.decided for _, tb in rated]),
        difference=float(sum(fractions, Fraction(0)) / n) if n else None,
        difference_ci=None
        if interval is None
        else (max(-1.0, interval.low), min(1.0, interval.high)),
        trial_test=trial_test,
        task_test=task_test,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        outcome=_outcome(trial_test, confidence),
        suite_outcome=_suite_outcome(task_test, fractions, confidence),
        conclusion="",
        suite_conclusion="",
        mean_score_delta=whole[0],
        cost_per_trial_delta=whole[1],
        latency_p50_delta_s=whole[2],
    )
    return pair


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _trial_test(ids: list[str], tables: list[Table], confidence: float) -> TrialTest | None:
    if not tables:
        return None
    result = stratified_exact_test(tables)
    cmh = cmh_statistic(tables)
    informative = [(i, t) for i, t in zip(ids, tables, strict=True) if t.informative]
    p_values = [fisher_exact(t) for _, t in informative]
    adjusted = holm(p_values)
    alpha = 1 - confidence
    task_tests = [
        TaskTest(
            id=i,
            passed_a=t.passed_a,
            decided_a=t.trials_a,
            passed_b=t.passed_b,
            decided_b=t.trials_b,
            p_value=p,
            adjusted_p_value=q,
            significant=q < alpha,
        )
        for (i, t), p, q in zip(informative, p_values, adjusted, strict=True)
    ]
    task_tests.sort(key=lambda x: (x.p_value, x.id))
    return TrialTest(
        tasks=len(tables),
        informative_tasks=result.tables,
        passed_b=result.observed,
        expected_b=result.expected,
        p_value=result.p_value,
        p_lower=result.p_lower,
        exact=result.exact,
        cmh_statistic=None if cmh is None else cmh[0],
        cmh_p_value=None if cmh is None else cmh[1],
        task_tests=task_tests,
        detectable=detectable_trial_change(tables, confidence),
    )


def _task_test(
    differences: list[Fraction],
    tables: list[Table],
    confidence: float,
    resamples: int,
    seed: int,
) -> TaskLevelTest | None:
    flip = sign_flip_test(differences, resamples=resamples, seed=seed)
    if flip is None:
        return None
    floats = [float(d) for d in differences]
    t = paired_t(floats, confidence)
    return TaskLevelTest(
        tasks=flip.tasks,
        changed_tasks=sum(1 for d in differences if d),
        sign_flip_p_value=flip.p_value,
        exact=flip.exact,
        resamples=flip.resamples,
        smallest_p=flip.smallest_p,
        t_p_value=None if t is None else t.p_value,
        detectable=detectable_task_change(floats, tables, confidence),
    )


def gate_outcome(tables: list[Table], confidence: float) -> Outcome:
    """The gate's outcome over tasks given as tables of decided trials (what `outcome` is)."""
    return _outcome(
        _trial_test([str(i) for i in range(len(tables))], tables, confidence), confidence
    )


def significant_tasks(test: TrialTest, direction: int) -> list[TaskTest]:
    """The tasks whose own change is significant (Holm-adjusted), worse (−1) or better (1)."""
    return [
        t
        for t in test.task_tests
        if t.significant and (t.passed_b * t.decided_a - t.passed_a * t.decided_b) * direction > 0
    ]


def _outcome(test: TrialTest | None, confidence: float) -> Outcome:
    """`worse` when the exact stratified test finds B passing fewer trials than expected, or
    when a task on its own is significantly worse after Holm's adjustment (a task named as
    broken always fails the gate; each half keeps its false alarms under α/2 in one
    direction, so the two together stay under α); `better` likewise the other way."""
    if test is None:
        return "cannot_tell"
    significant = test.p_value < 1 - confidence and abs(test.passed_b - test.expected_b) >= 1e-9
    if (significant and test.passed_b < test.expected_b) or significant_tasks(test, -1):
        return "worse"
    if (significant and test.passed_b > test.expected_b) or significant_tasks(test, 1):
        return "better"
    return "no_difference"


def _suite_outcome(
    test: TaskLevelTest | None, differences: list[Fraction], confidence: float
) -> SuiteOutcome:
    if test is None:
        return "cannot_tell"
    if not test.changed_tasks and test.tasks >= fewest_tasks(confidence):
        return "no_difference"
    if test.smallest_p >= 1 - confidence:
        return "too_few_tasks"
    if test.sign_flip_p_value >= 1 - confidence:
        return "no_difference"
    return "worse" if sum(differences) < 0 else "better"
