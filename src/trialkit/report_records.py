"""The records of a run's report: `Report` and its parts, the plan of a task, the CI gate.

Data and the rules that read it; building a report from trials is `trialkit.report`, rendering
is `trialkit.reports`. Every name here is importable from `trialkit.report` as well. The JSON
form of `Report` is a documented, versioned format (see docs/file-formats.md).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AwareDatetime, Field

from trialkit._record import ErrorInfo, Record, share_field_sets
from trialkit.score import Score, Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import Usage
from trialkit.trial import SandboxRecord, Trial, TrialStatus

if TYPE_CHECKING:
    from trialkit.task import Task

REPORT_SCHEMA_VERSION = 1
OUTPUT_PREVIEW_CHARS = 4000
MAX_RESULTS_PER_TASK = 20
"""A task lists every trial up to this many; past it, its first this-many non-passing ones."""


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
    started_at: AwareDatetime | None = None
    """When the trial started (`null` in reports written before it was recorded)."""
    usage: Usage = Field(default_factory=Usage)
    """Tokens of the agent's model calls."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Tokens of the graders' model calls (judges)."""
    cost_usd: float | None = None
    """Cost of all model calls, the agent's and the graders'; `None` when unknown."""
    grader_cost_usd: float | None = None
    """The graders' part of `cost_usd`: 0 when the graders called no model (code graders are
    free), `None` when a grader's call has an unknown price."""
    sandbox: SandboxRecord | None = None
    """Which sandbox ran the trial, its network per phase, its limits, its image, and the
    limit hit if one was; `None` when nothing of the trial ran in a sandbox."""

    @classmethod
    def from_trial(cls, trial: Trial) -> TrialResult:
        """What a report keeps of `trial`, with every secret redacted (`trialkit.secrets`)."""
        from trialkit.secrets import redact_record

        return redact_record(
            cls(
                trial=trial.index,
                verdict=trial.verdict,
                status=trial.status,
                scores=trial.scores,
                output=preview_output(trial.outcome.output),
                failed=trial.outcome.failed,
                error=trial.error,
                duration_s=trial.duration_s,
                started_at=trial.started_at,
                usage=trial.usage,
                grader_usage=trial.grader_usage,
                cost_usd=trial.cost_usd,
                grader_cost_usd=trial.grader_cost_usd,
                sandbox=trial.sandbox,
            )
        )


class TaskReport(Record):
    id: str
    kind: SuiteKind
    """`capability` or `regression`: what decided this task's verdict."""
    expect: Literal["success", "failure"] = "success"
    tags: list[str] = Field(default_factory=list)
    file: str | None = None
    """The file that defines the task (relative to the run's working directory when under
    it): its suite file, a dataset file for a generated task, or Python source."""
    line: int | None = None
    """The line of `file` where the task is defined."""
    verdict: Verdict
    trials: int
    passed: int
    failed: int
    errors: int
    unknown: int = 0
    pending: int = 0
    """Trials with a check waiting for a human reviewer; unknown until it is labelled."""
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
    wall_s: float | None = None
    """Seconds from the start of its first trial to the end of its last (trials of a task run
    side by side, so this is less than their durations added up); `null` when unknown."""
    usage: Usage = Field(default_factory=Usage)
    """Agent tokens summed over this task's trials."""
    grader_usage: Usage = Field(default_factory=Usage)
    """Grader tokens summed over this task's trials."""
    cost_usd: float | None = None
    """Total cost (agent and graders); `None` if any trial's is unknown."""
    grader_cost_usd: float | None = None
    """The graders' part of `cost_usd`; `None` if any trial's is unknown."""
    results: list[TrialResult] = Field(default_factory=list)
    """Every trial by number; past 20 trials, the first 20 non-passing ones."""
    results_omitted: int = 0
    """Trials of this task not listed in `results`."""
    stopped: str | None = None
    """With adaptive trials: why this task needed no more trials."""

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
    """The mean over tasks with a decided trial of each task's pass rate (pass@1; the same as
    passed over decided trials when every task has as many decided trials)."""
    pass_rate_ci: tuple[float, float] | None
    """Its 95% task-clustered interval (the tasks are a sample; `metrics.task_mean_interval`):
    what the pass rate of tasks like these may be. (It was a Wilson interval of the pooled
    trials, which took trials to be independent and was up to 2–3× too narrow.)"""
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
    pending: int = 0
    """Trials with a check waiting for a human reviewer."""
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
    """Everything a run concluded; render it with `to_markdown`, `to_json`, `to_junit` or
    `to_html` (the same as `trialkit.reports.render_markdown(report)` and its siblings).

    The renderers live in `trialkit.reports` and know `Report` by its type alone (imported for
    type checking only), so the imports inside these methods go one way: no module of the
    report imports a renderer that imports it back."""

    schema_version: int = REPORT_SCHEMA_VERSION
    run: RunInfo
    suite: SuiteInfo
    summary: Summary
    tasks: list[TaskReport]

    def __repr__(self) -> str:
        # Short on purpose: asyncio's runner calls repr() on the value a run returns.
        s = self.summary
        return f"<Report run={self.run.id} suite={self.suite.id} tasks={s.tasks} trials={s.trials}>"

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
        from trialkit.reports._json_render import render_json

        return render_json(self, indent=indent)

    def to_junit(
        self,
        *,
        capability_failures: Literal["failure", "skipped", "passed"] = "skipped",
        locations: Literal["text", "attributes"] = "text",
    ) -> str:
        """JUnit XML. A failed capability task (which does not fail the gate) is `<skipped>`
        by default, or a `<failure>`, or passed; where each task is defined is a
        `<system-out>` line (valid under junit-10.xsd) or `file`/`line` attributes
        (`locations="attributes"`, which the strict schema refuses)."""
        from trialkit.reports.junit import render_junit

        return render_junit(self, capability_failures=capability_failures, locations=locations)

    def to_html(self) -> str:
        from trialkit.reports.html import render_html

        return render_html(self)

    def gate(
        self,
        *,
        min_pass_rate: float | EllipsisType | None = ...,
        fail_on_error: float | EllipsisType = ...,
    ) -> Gate:
        """The CI gate. A threshold left out (`...`) is the one the run was started with
        (`run.config["gate"]`), so a report written later concludes the same."""
        stored = self.run.config.get("gate") or {}
        if min_pass_rate is ...:
            min_pass_rate = stored.get("min_pass_rate")
        if fail_on_error is ...:
            fail_on_error = float(stored.get("fail_on_error", 0))
        return evaluate_gate(self, min_pass_rate=min_pass_rate, fail_on_error=fail_on_error)

    @property
    def cache_mode(self) -> str:
        """How the run's model calls were made: `live`, `record`, `replay` or `auto` (replay
        what the cassette held, record the rest)."""
        cache = self.run.config.get("cache") or {}
        return str(cache.get("mode") or "live")

    @property
    def cache_folder(self) -> str | None:
        """The cassette folder of a run that used one."""
        cache = self.run.config.get("cache") or {}
        folder = cache.get("folder")
        return None if folder is None else str(folder)


class TaskPlan(Record):
    """What a report needs to know of a task before any of its trials ran."""

    id: str
    kind: SuiteKind
    expect: Literal["success", "failure"] = "success"
    tags: list[str] = Field(default_factory=list)
    file: str | None = None
    """Where the task is defined (see `TaskReport.file`)."""
    line: int | None = None
    reference: str | None = None
    """The task's known-good answer (`Task.reference`); kept out of reports."""
    criteria: str | None = None
    """The task's success criteria in prose (`Task.criteria`); kept out of reports."""
    trials: int | None = None
    """How many trials the task was to run; `None` when not known (adaptive trials, which
    stop when the verdict is clear, or a run stored before trialkit recorded it). A finished
    run whose task has fewer trials stored than this has trials that never finished."""

    @classmethod
    def of(cls, task: Task, kind: SuiteKind, *, trials: int | None = None) -> TaskPlan:
        """The plan of `task`, with its source location (`Task.source`) as `shown_path` gives
        it, its reference, its criteria and the trials it is to run."""
        file, line = (None, None) if task.source is None else task.source
        plan = cls(
            id=task.id,
            kind=kind,
            expect=task.expect,
            tags=task.tags,
            file=None if file is None else shown_path(file),
            line=line,
            reference=task.reference,
            criteria=task.criteria,
            trials=trials,
        )
        share_field_sets(plan)  # one per task, for the whole run
        return plan


def shown_path(file: str) -> str:
    """`file` relative to the working directory when it is under it (with `/` separators, as
    CI annotations want), else as given."""
    return _shown_path(file, os.getcwd())


@functools.lru_cache(maxsize=256)
def _shown_path(file: str, cwd: str) -> str:
    """`shown_path` in `cwd`: a suite's thousands of tasks share a few files."""
    path = Path(file)
    if path.is_absolute():
        try:
            return path.relative_to(cwd).as_posix()
        except ValueError:
            return file
    return path.as_posix() if os.sep != "/" else file


@dataclass(frozen=True)
class Measures:
    """Mean score and latency percentiles of trials: from results, or from SQL in the store."""

    score_sum: float
    """`math.fsum` of the score values (correctly rounded, so independent of order)."""
    score_count: int
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.score_count if self.score_count else None


@dataclass(frozen=True)
class TaskTotals:
    """A task's trials counted and summed: what its `TaskReport` is built from."""

    passed: int
    failed: int
    errors: int
    unknown: int
    usage: Usage
    grader_usage: Usage
    cost_usd: float | None  # `math.fsum`, `None` if any trial's is unknown
    grader_cost_usd: float | None
    measures: Measures
    pending: int = 0  # trials with a check waiting for a human reviewer
    first_start: datetime | None = None  # of any trial
    last_end: datetime | None = None  # started_at + duration_s, the latest of any trial


class Gate(Record):
    """Whether a run passes CI, and why not."""

    exit_code: Literal[0, 1, 3]
    """0 passed; 1 failed (a regression task did not pass, the pass rate is under the minimum,
    or a cost budget stopped the run early); 3 more trials errored than allowed (which wins
    over 1: a run whose trials errored cannot be trusted to have passed)."""
    reasons: list[str] = Field(default_factory=list)
    """Every reason the gate failed, the errors first: all of them, whichever decided the
    exit code."""
    min_pass_rate: float | None = None
    """The threshold it was judged against (`--min-pass-rate`), if any."""
    fail_on_error: float = 0
    """Errored trials allowed (`--fail-on-error`): a count, or a fraction of the trials."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    @property
    def verdict(self) -> Literal["passed", "failed"]:
        return "passed" if self.passed else "failed"


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
    errored = summary.errors > allowed
    if errored:
        reasons.append(
            f"{summary.errors} of {summary.trials} trials errored "
            f"(allowed: {_allowance(fail_on_error)})"
        )
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
    code: Literal[0, 1, 3] = 3 if errored else 1 if reasons else 0
    return Gate(
        exit_code=code, reasons=reasons, min_pass_rate=min_pass_rate, fail_on_error=fail_on_error
    )


def _allowance(fail_on_error: float) -> str:
    if fail_on_error == 0:
        return "none"
    if 0 < fail_on_error < 1:
        return f"{fail_on_error:.0%} of trials"
    return f"{int(fail_on_error)}"
