"""The report of a run: per-task and per-suite aggregates. Data only; rendering is in `reports/`.

The JSON form of `Report` is a documented, versioned format (see docs/file-formats.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import AwareDatetime, Field

from trialkit import metrics
from trialkit._record import ErrorInfo, Record
from trialkit.score import Score, Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import Trial, TrialStatus

REPORT_SCHEMA_VERSION = 1
OUTPUT_PREVIEW_CHARS = 4000


class RunInfo(Record):
    id: str
    name: str | None = None
    started_at: AwareDatetime
    finished_at: AwareDatetime | None = None
    status: Literal["running", "completed", "interrupted", "stopped"] = "completed"
    """`stopped`: the `--max-cost` budget ran out; `config.stop_reason` says when."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The settings the run used (trials, concurrency, timeout, selection)."""


class SuiteInfo(Record):
    id: str
    kind: SuiteKind
    description: str | None = None


def preview_output(output: str | None) -> str | None:
    """The output as reports keep it: cut at `OUTPUT_PREVIEW_CHARS`, marked with "…"."""
    if output is not None and len(output) > OUTPUT_PREVIEW_CHARS:
        return output[:OUTPUT_PREVIEW_CHARS] + "…"
    return output


class TrialResult(Record):
    """What a report keeps of one trial (the full transcript stays in the store)."""

    trial: int
    verdict: Verdict
    status: TrialStatus = TrialStatus.COMPLETED
    scores: list[Score] = Field(default_factory=list)
    output: str | None = None
    """The final output, cut at 4,000 characters."""
    failed: bool = False
    """The agent raised or reported failure."""
    error: ErrorInfo | None = None
    duration_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    """Tokens of the agent's model calls."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Tokens of the graders' model calls (judges)."""
    cost_usd: float | None = None
    """Cost of all model calls, the agent's and the graders'; `None` when unknown."""
    grader_cost_usd: float | None = None
    """The graders' part of `cost_usd`: 0 when the graders called no model (code graders are
    free), `None` when a grader's call has an unknown price."""

    @classmethod
    def from_trial(cls, trial: Trial) -> TrialResult:
        return cls(
            trial=trial.index,
            verdict=trial.verdict,
            status=trial.status,
            scores=trial.scores,
            output=preview_output(trial.outcome.output),
            failed=trial.outcome.failed,
            error=trial.error,
            duration_s=trial.duration_s,
            usage=trial.usage,
            grader_usage=trial.grader_usage,
            cost_usd=trial.cost_usd,
            grader_cost_usd=trial.grader_cost_usd,
        )


class TaskReport(Record):
    id: str
    kind: SuiteKind
    """`capability` or `regression`: what decided this task's verdict."""
    expect: Literal["success", "failure"] = "success"
    tags: list[str] = Field(default_factory=list)
    verdict: Verdict
    trials: int
    passed: int
    failed: int
    errors: int
    unknown: int = 0
    pass_rate: float | None
    """Passed trials over decided (pass or fail) trials; `null` when none was decided."""
    pass_rate_ci: tuple[float, float] | None
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    flaky: bool = False
    """Its decided trials disagree: some passed, some failed."""
    mean_score: float | None = None
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    usage: Usage = Field(default_factory=Usage)
    """Agent tokens summed over this task's trials."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Grader tokens summed over this task's trials."""
    cost_usd: float | None = None
    """Total cost (agent and graders); `None` if any trial's is unknown."""
    grader_cost_usd: float | None = None
    """The graders' part of `cost_usd`; `None` if any trial's is unknown."""
    results: list[TrialResult] = Field(default_factory=list)

    @property
    def decided(self) -> int:
        return self.passed + self.failed


class Summary(Record):
    tasks: int
    trials: int
    passed_tasks: int
    failed_tasks: int
    error_tasks: int
    unknown_tasks: int = 0
    pass_rate: float | None
    """Passed trials over decided trials, over the whole suite."""
    pass_rate_ci: tuple[float, float] | None
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    pass_k_excluded: list[str] = Field(default_factory=list)
    """Tasks left out of pass@k and pass^k because no trial of theirs was decided."""
    flakiness_rate: float | None
    flaky_tasks: int = 0
    passed: int = 0
    failed: int = 0
    errors: int
    """Trials that errored (counted apart from fails)."""
    unknown: int = 0
    mean_score: float | None = None
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    usage: Usage = Field(default_factory=Usage)
    """Agent tokens summed over all trials."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Grader tokens summed over all trials."""
    cost_usd: float | None = None
    """Total cost (agent and graders); `None` if any task's is unknown."""
    grader_cost_usd: float | None = None
    """The graders' part of `cost_usd`; `None` if any task's is unknown."""
    duration_s: float | None = None


class Report(Record):
    """Everything a run concluded; render it with `to_markdown`, `to_json`, `to_junit`."""

    schema_version: int = REPORT_SCHEMA_VERSION
    run: RunInfo
    suite: SuiteInfo
    summary: Summary
    tasks: list[TaskReport]

    def task(self, task_id: str) -> TaskReport:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    @property
    def failing_tasks(self) -> list[TaskReport]:
        """Tasks whose verdict is not pass, and tasks with any non-passing trial."""
        return [t for t in self.tasks if t.verdict is not Verdict.PASS or t.passed < t.trials]

    def to_markdown(self) -> str:
        from trialkit.reports.markdown import render_markdown

        return render_markdown(self)

    def to_json(self, *, indent: int | None = 2) -> str:
        from trialkit.reports.json import render_json

        return render_json(self, indent=indent)

    def to_junit(self) -> str:
        from trialkit.reports.junit import render_junit

        return render_junit(self)

    def gate(self, *, min_pass_rate: float | None = None, fail_on_error: float = 0) -> Gate:
        return evaluate_gate(self, min_pass_rate=min_pass_rate, fail_on_error=fail_on_error)


class TaskPlan(Record):
    """What a report needs to know of a task before any of its trials ran."""

    id: str
    kind: SuiteKind
    expect: Literal["success", "failure"] = "success"
    tags: list[str] = Field(default_factory=list)


def task_verdict(kind: SuiteKind, verdicts: Sequence[Verdict]) -> Verdict:
    """A task's verdict from its trials' verdicts.

    Capability: passes when at least one trial passed. Regression: passes only when every
    trial passed; a failed trial fails it, otherwise an errored one errors it. A task with no
    trial is an error: nothing was measured.
    """
    if not verdicts:
        return Verdict.ERROR
    present = set(verdicts)
    if kind is SuiteKind.CAPABILITY:
        for v in (Verdict.PASS, Verdict.FAIL, Verdict.ERROR):
            if v in present:
                return v
        return Verdict.UNKNOWN
    for v in (Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN):
        if v in present:
            return v
    return Verdict.PASS


def build_task_report(plan: TaskPlan, results: Sequence[TrialResult]) -> TaskReport:
    results = sorted(results, key=lambda r: r.trial)
    verdicts = [r.verdict for r in results]
    passed = verdicts.count(Verdict.PASS)
    failed = verdicts.count(Verdict.FAIL)
    decided = passed + failed
    ks = {}
    hat = {}
    if decided:
        ks = {str(k): float(metrics.pass_at_k(decided, passed, k)) for k in range(1, decided + 1)}
        hat = {str(k): float(metrics.pass_hat_k(decided, passed, k)) for k in range(1, decided + 1)}
    values = [s.value for r in results for s in r.scores if s.value is not None]
    durations = [r.duration_s for r in results]
    return TaskReport(
        id=plan.id,
        kind=plan.kind,
        expect=plan.expect,
        tags=plan.tags,
        verdict=task_verdict(plan.kind, verdicts),
        trials=len(results),
        passed=passed,
        failed=failed,
        errors=verdicts.count(Verdict.ERROR),
        unknown=verdicts.count(Verdict.UNKNOWN),
        pass_rate=metrics.rate(passed, decided),
        pass_rate_ci=metrics.wilson_interval(passed, decided),
        pass_at_k=ks,
        pass_hat_k=hat,
        flaky=0 < passed < decided,
        mean_score=sum(values) / len(values) if values else None,
        latency_p50_s=metrics.percentile(durations, 50),
        latency_p95_s=metrics.percentile(durations, 95),
        usage=sum((r.usage for r in results), Usage()),
        grader_usage=sum((r.grader_usage for r in results), Usage()),
        cost_usd=_sum_known([r.cost_usd for r in results]),
        grader_cost_usd=_sum_known([r.grader_cost_usd for r in results]),
        results=list(results),
    )


def _sum_known(costs: Iterable[float | None]) -> float | None:
    """The total cost, or `None` if any part is unknown: an unknown cost is never zero."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return total


def build_summary(tasks: Sequence[TaskReport], *, duration_s: float | None = None) -> Summary:
    counts = [(t.decided, t.passed) for t in tasks if t.decided > 0]
    excluded = [t.id for t in tasks if t.decided == 0]
    passed = sum(t.passed for t in tasks)
    failed = sum(t.failed for t in tasks)
    durations = [r.duration_s for t in tasks for r in t.results]
    values = [s.value for t in tasks for r in t.results for s in r.scores if s.value is not None]
    flaky_groups = [[True] * t.passed + [False] * t.failed for t in tasks]
    return Summary(
        tasks=len(tasks),
        trials=sum(t.trials for t in tasks),
        passed_tasks=sum(t.verdict is Verdict.PASS for t in tasks),
        failed_tasks=sum(t.verdict is Verdict.FAIL for t in tasks),
        error_tasks=sum(t.verdict is Verdict.ERROR for t in tasks),
        unknown_tasks=sum(t.verdict is Verdict.UNKNOWN for t in tasks),
        pass_rate=metrics.rate(passed, passed + failed),
        pass_rate_ci=metrics.wilson_interval(passed, passed + failed),
        pass_at_k={str(k): v for k, v in metrics.pass_at_k_table(counts).items()},
        pass_hat_k={str(k): v for k, v in metrics.pass_hat_k_table(counts).items()},
        pass_k_excluded=excluded,
        flakiness_rate=metrics.flakiness_rate(flaky_groups),
        flaky_tasks=sum(t.flaky for t in tasks),
        passed=passed,
        failed=failed,
        errors=sum(t.errors for t in tasks),
        unknown=sum(t.unknown for t in tasks),
        mean_score=sum(values) / len(values) if values else None,
        latency_p50_s=metrics.percentile(durations, 50),
        latency_p95_s=metrics.percentile(durations, 95),
        usage=sum((t.usage for t in tasks), Usage()),
        grader_usage=sum((t.grader_usage for t in tasks), Usage()),
        cost_usd=_sum_known([t.cost_usd for t in tasks]),
        grader_cost_usd=_sum_known([t.grader_cost_usd for t in tasks]),
        duration_s=duration_s,
    )


def build_report(
    run: RunInfo,
    suite: SuiteInfo,
    plans: Sequence[TaskPlan],
    results: dict[str, list[TrialResult]],
) -> Report:
    """Aggregate trial results into a report; tasks keep the order of `plans`."""
    tasks = [build_task_report(plan, results.get(plan.id, [])) for plan in plans]
    duration = None
    if run.finished_at is not None:
        duration = (run.finished_at - run.started_at).total_seconds()
    return Report(
        run=run, suite=suite, summary=build_summary(tasks, duration_s=duration), tasks=tasks
    )


class Gate(Record):
    """Whether a run passes CI, and why not."""

    exit_code: Literal[0, 1, 3]
    """0 passed; 1 failed (a regression task did not pass, the pass rate is under the minimum,
    or a cost budget stopped the run early); 3 more trials errored than allowed."""
    reasons: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def evaluate_gate(
    report: Report, *, min_pass_rate: float | None = None, fail_on_error: float = 0
) -> Gate:
    """Exit 3 when more trials errored than allowed, else 1 when the gate failed, else 0.

    `fail_on_error` is a count of errored trials allowed (a whole number >= 1, or 0) or a
    fraction of all trials (0 < x < 1). The gate fails when a regression task did not pass
    (fail, or unknown), or when the suite's pass rate is under `min_pass_rate`.
    """
    summary = report.summary
    reasons: list[str] = []
    allowed = fail_on_error * summary.trials if 0 < fail_on_error < 1 else fail_on_error
    if summary.errors > allowed:
        reasons.append(
            f"{summary.errors} of {summary.trials} trials errored "
            f"(allowed: {_allowance(fail_on_error)})"
        )
        return Gate(exit_code=3, reasons=reasons)
    broken = [
        t.id
        for t in report.tasks
        if t.kind is SuiteKind.REGRESSION and t.verdict in (Verdict.FAIL, Verdict.UNKNOWN)
    ]
    if broken:
        reasons.append(f"regression tasks did not pass: {', '.join(broken)}")
    if report.run.status == "stopped":
        reasons.append(f"not every trial ran: {report.run.config.get('stop_reason', 'stopped')}")
    if min_pass_rate is not None:
        rate = summary.pass_rate
        if rate is None or rate < min_pass_rate:
            shown = "n/a" if rate is None else f"{rate:.1%}"
            reasons.append(f"pass rate {shown} is under the minimum {min_pass_rate:.1%}")
    return Gate(exit_code=1 if reasons else 0, reasons=reasons)


def _allowance(fail_on_error: float) -> str:
    if fail_on_error == 0:
        return "none"
    if 0 < fail_on_error < 1:
        return f"{fail_on_error:.0%} of trials"
    return f"{int(fail_on_error)}"
