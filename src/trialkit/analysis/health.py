"""Suite health: which tasks of a suite still tell anything, over its last runs.

Per task, over the window (the suite's last N runs, whatever model ran them):

- saturated: ran in at least `MIN_RUNS` runs and passed every trial. A saturated capability
  task is a graduation candidate: it measures nothing new and belongs in a regression suite.
- broken: never passed, or one of its graders errored on at least `BROKEN_GRADER_SHARE` of its
  trials. Probably a bad task or a bad grader; `evidence` says what was seen. A task only one
  model has run may just be hard for it, and the evidence says so.
- flaky: in some run its decided trials disagreed (some passed, some failed).
- trend: the least-squares slope of its pass rate over the runs, in pass rate per run (runs
  numbered in time order; at least `MIN_RUNS` runs with decided trials).

For the suite: the share of saturated tasks, and whether it still discriminates between the
models it has seen. Each model's latest run in the window gives each task a verdict; on the
tasks every model decided, the models are tested for a difference: the exact McNemar test for
two models, Cochran's Q (chi-squared with k − 1 degrees of freedom) for k > 2. The suite
discriminates when the test rejects "every model passes the same tasks as often" at the
chosen confidence.

Everything comes from per-task verdict counts and grader error counts grouped by the database
(`_history.py`), never from loading trials.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import AwareDatetime, Field

from trialkit._record import Record
from trialkit.analysis import _history
from trialkit.analysis._history import GraderErrors
from trialkit.analysis._significance import (
    DEFAULT_CONFIDENCE,
    check_confidence,
    cochran_q,
    confidence_text,
    mcnemar_exact,
)
from trialkit.consistency import ConsistencyTally, JudgeConsistency
from trialkit.consistency import from_config as consistency_of_config
from trialkit.report import SuiteInfo, TaskPlan, task_verdict
from trialkit.score import Verdict
from trialkit.task import SuiteKind

if TYPE_CHECKING:
    from trialkit.store import Store

HEALTH_SCHEMA_VERSION = 1
DEFAULT_LAST = 10
MIN_RUNS = 2
"""Runs a task needs in the window before it can be called saturated or given a trend."""
BROKEN_GRADER_SHARE = 0.5
DEFAULT_MAX_JUDGE_FLIPS = 0.1
"""A judge asked several times on each output (`repeats`) whose verdicts flip on more than
this share of the outputs is flagged (`trialkit health --max-judge-flips`)."""
"""A grader that errored on at least this share of a task's trials marks the task broken."""
UNKNOWN_AGENT = "(unknown)"


class HealthError(LookupError):
    """There is nothing to assess: no run, or no run of the suite asked for."""


class HealthRun(Record):
    """A run of the window."""

    id: str
    name: str | None = None
    status: str
    started_at: AwareDatetime
    model: str | None = None
    """The model under test: the run's setting, else its trials' model."""
    harness: str | None = None

    @property
    def agent(self) -> str:
        """What ran: the model, else the harness; runs are grouped by it."""
        return self.model or self.harness or UNKNOWN_AGENT


class GraderEvidence(Record):
    """A grader that errored on a task's trials in the window."""

    grader: str
    errors: int
    """Trials of the task it errored on."""
    trials: int
    """The task's trials in the window."""
    example: str | None = None
    """One of its error messages."""


class TaskHealth(Record):
    id: str
    kind: SuiteKind
    runs: int
    """Runs of the window with trials of this task."""
    models: list[str]
    """What ran it (models, else harnesses), in order of first run."""
    trials: int
    passed: int
    failed: int
    errors: int
    unknown: int = 0
    pass_rate: float | None
    """Passed over decided trials over the window; `null` when none was decided."""
    pass_rates: list[float | None]
    """One per run of the window, oldest first; `null` where it had no decided trial."""
    saturated: bool
    graduation_candidate: bool
    """Saturated and a capability task: a candidate for the regression suite."""
    broken: bool
    flaky: bool
    flaky_runs: int
    """Runs whose decided trials of this task disagreed."""
    trend: float | None
    """Slope of the pass rate over the runs, per run; `null` with fewer than 2 runs."""
    grader_errors: list[GraderEvidence]
    evidence: list[str]
    """Why it is broken, in words."""


class Discrimination(Record):
    """Whether the models seen still pass different tasks."""

    models: list[str]
    tasks: int
    """Tasks every model's latest run passed or failed: what the test compares."""
    passed_tasks: dict[str, int]
    """Of those tasks, how many each model passed."""
    discriminating_tasks: list[str]
    """Tasks some models passed and others failed."""
    test: Literal["mcnemar_exact", "cochran_q"] | None = None
    statistic: float | None = None
    """Cochran's Q (for more than two models)."""
    p_value: float | None = None
    confidence: float
    discriminates: bool | None
    """`null` when fewer than two models were seen, or no task was decided by all."""
    conclusion: str


class SuiteHealth(Record):
    """The health of a suite over its last runs; render with `to_markdown`, `to_json`."""

    schema_version: int = HEALTH_SCHEMA_VERSION
    suite: SuiteInfo
    last: int
    """The window asked for: the suite's last this-many runs."""
    runs: list[HealthRun]
    """The runs of the window, oldest first."""
    tasks: list[TaskHealth]
    saturated: list[str]
    saturated_share: float | None
    """Saturated tasks over the tasks that ran in the window."""
    graduation_candidates: list[str]
    broken: list[str]
    flaky: list[str]
    discrimination: Discrimination
    notes: list[str]
    judges: list[JudgeConsistency] = Field(default_factory=list)
    """Each judge asked several times on each output (`repeats`), over the window's runs: how
    often its verdicts flipped on the same output, and how often its answers agree."""
    max_judge_flips: float = DEFAULT_MAX_JUDGE_FLIPS
    flipping_judges: list[str] = Field(default_factory=list)
    """The judges (score names) whose flip rate is over `max_judge_flips`."""

    def to_markdown(self) -> str:
        from trialkit.reports.health import render_health_markdown

        return render_health_markdown(self)

    def to_json(self, *, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent) + "\n"


@dataclass(frozen=True)
class RunHistory:
    """What health reads of one run: its tasks, their verdict counts and grader errors."""

    run: HealthRun
    plans: list[TaskPlan]
    counts: dict[str, Counter[Verdict]]
    """Trials of each task, counted by verdict."""
    grader_errors: dict[str, dict[str, GraderErrors]] = field(default_factory=dict)
    """Per task, per grader: the trials it errored on."""


def suite_health(
    store: Store,
    suite_id: str | None = None,
    *,
    last: int = DEFAULT_LAST,
    confidence: float = DEFAULT_CONFIDENCE,
    counts: Mapping[str, dict[str, Counter[Verdict]]] | None = None,
    max_judge_flips: float = DEFAULT_MAX_JUDGE_FLIPS,
) -> SuiteHealth:
    """The health of `suite_id` (default: the suite of the latest run) over its `last` runs.

    `counts` are verdict counts the caller has already read (as `verdict_counts` gives them,
    by run id): the runs they cover are not counted again."""
    if last < 1:
        raise ValueError(f"last={last} must be >= 1")
    if suite_id is None:
        suite_id = _history.latest_suite_id(store)
        if suite_id is None:
            raise HealthError("the store has no runs yet: `trialkit run TARGET` makes one")
    stored = _history.suite_runs(store, suite_id, last)
    if not stored:
        known = ", ".join(_history.known_suites(store)) or "none"
        raise HealthError(
            f"no run of suite {suite_id!r} in the store {store.url} (suites with runs: {known})"
        )
    ids = [r.id for r in stored]
    models = _history.run_models(store, {r.id: r.config for r in stored})
    plans = _history.planned_tasks(store, ids)
    read = dict(counts or {})
    missing = [run_id for run_id in ids if run_id not in read]
    read |= _history.verdict_counts(store, missing) if missing else {}
    errors = _history.grader_errors(store, ids)
    histories = [
        RunHistory(
            run=HealthRun(
                id=r.id,
                name=r.name,
                status=r.status,
                started_at=r.started_at,
                model=models[r.id],
                harness=_text(r.config.get("harness")),
            ),
            plans=plans[r.id],
            counts=read[r.id],
            grader_errors=errors[r.id],
        )
        for r in stored
    ]
    latest = stored[-1]
    suite = SuiteInfo(id=suite_id, kind=latest.suite_kind)
    judges = ConsistencyTally(c for r in stored for c in consistency_of_config(r.config))
    return assess_health(
        suite,
        histories,
        last=last,
        confidence=confidence,
        judges=judges.results(),
        max_judge_flips=max_judge_flips,
    )


def _text(value: object) -> str | None:
    return str(value) if value else None


def assess_health(
    suite: SuiteInfo,
    histories: Sequence[RunHistory],
    *,
    last: int = DEFAULT_LAST,
    confidence: float = DEFAULT_CONFIDENCE,
    judges: Sequence[JudgeConsistency] = (),
    max_judge_flips: float = DEFAULT_MAX_JUDGE_FLIPS,
) -> SuiteHealth:
    """The health of a suite from its runs' histories, oldest first; `judges`: the repeated
    judges' consistency over those runs, flagged above `max_judge_flips`."""
    check_confidence(confidence)
    if not 0.0 <= max_judge_flips <= 1.0:
        raise ValueError(f"max_judge_flips={max_judge_flips} must be within [0, 1]")
    tasks = [_task_health(task_id, kind, histories) for task_id, kind in _task_order(histories)]
    tasks = [t for t in tasks if t.runs]
    saturated = [t.id for t in tasks if t.saturated]
    notes = []
    if len(histories) < MIN_RUNS:
        notes.append(
            f"only {len(histories)} run in the window: saturation and trends need "
            f"{MIN_RUNS} runs of a task"
        )
    return SuiteHealth(
        suite=suite,
        last=last,
        runs=[h.run for h in histories],
        tasks=tasks,
        saturated=saturated,
        saturated_share=len(saturated) / len(tasks) if tasks else None,
        graduation_candidates=[t.id for t in tasks if t.graduation_candidate],
        broken=[t.id for t in tasks if t.broken],
        flaky=[t.id for t in tasks if t.flaky],
        discrimination=discrimination(histories, confidence=confidence),
        notes=notes,
        judges=list(judges),
        max_judge_flips=max_judge_flips,
        flipping_judges=[
            j.grader for j in judges if j.flip_rate is not None and j.flip_rate > max_judge_flips
        ],
    )


def _task_order(histories: Sequence[RunHistory]) -> list[tuple[str, SuiteKind]]:
    """Tasks of the latest run in its order, then those only older runs had, newest first;
    each with the kind its latest run gave it."""
    kinds: dict[str, SuiteKind] = {}
    for history in reversed(histories):
        for plan in history.plans:
            kinds.setdefault(plan.id, plan.kind)
    return list(kinds.items())


def _task_health(task_id: str, kind: SuiteKind, histories: Sequence[RunHistory]) -> TaskHealth:
    total: Counter[Verdict] = Counter()
    rates: list[float | None] = []
    models: dict[str, None] = {}
    runs = flaky_runs = 0
    graders: dict[str, list[GraderErrors]] = {}
    for history in histories:
        counts = history.counts.get(task_id, Counter())
        passed, decided = counts[Verdict.PASS], counts[Verdict.PASS] + counts[Verdict.FAIL]
        rates.append(passed / decided if decided else None)
        if counts.total():
            runs += 1
            models.setdefault(history.run.agent)
            total.update(counts)  # counts are positive: `+=` would only filter again
        if 0 < passed < decided:
            flaky_runs += 1
        for grader, errors in history.grader_errors.get(task_id, {}).items():
            graders.setdefault(grader, []).append(errors)
    trials = total.total()
    passed, failed = total[Verdict.PASS], total[Verdict.FAIL]
    grader_errors = [_grader_evidence(g, e, trials) for g, e in sorted(graders.items())]
    saturated = runs >= MIN_RUNS and trials > 0 and passed == trials
    never_passed = trials > 0 and passed == 0
    evidence = [_never_passed(total, runs, list(models))] if never_passed else []
    evidence += [
        _grader_words(e) for e in grader_errors if e.errors >= BROKEN_GRADER_SHARE * trials
    ]
    return TaskHealth(
        id=task_id,
        kind=kind,
        runs=runs,
        models=list(models),
        trials=trials,
        passed=passed,
        failed=failed,
        errors=total[Verdict.ERROR],
        unknown=total[Verdict.UNKNOWN],
        pass_rate=passed / (passed + failed) if passed + failed else None,
        pass_rates=rates,
        saturated=saturated,
        graduation_candidate=saturated and kind is SuiteKind.CAPABILITY,
        broken=bool(evidence),
        flaky=flaky_runs > 0,
        flaky_runs=flaky_runs,
        trend=slope(rates),
        grader_errors=grader_errors,
        evidence=evidence,
    )


def _grader_evidence(grader: str, errors: list[GraderErrors], trials: int) -> GraderEvidence:
    examples = [e.example for e in errors if e.example]
    return GraderEvidence(
        grader=grader,
        errors=sum(e.errors for e in errors),
        trials=trials,
        example=examples[-1] if examples else None,
    )


def _never_passed(total: Counter[Verdict], runs: int, models: list[str]) -> str:
    outcomes = [
        f"{total[v]} {word}"
        for v, word in ((Verdict.FAIL, "failed"), (Verdict.ERROR, "errored"))
        if total[v]
    ]
    if total[Verdict.UNKNOWN]:
        outcomes.append(f"{total[Verdict.UNKNOWN]} unknown")
    text = (
        f"never passed: 0 of {total.total()} trials in {_plural(runs, 'run')} "
        f"({', '.join(outcomes)}), run by {', '.join(models)}"
    )
    if len(models) == 1:
        text += "; only one model ran it, so it may be hard rather than broken"
    return text


def _grader_words(evidence: GraderEvidence) -> str:
    text = f"grader {evidence.grader!r} errored on {evidence.errors} of {evidence.trials} trials"
    return f"{text}: {evidence.example}" if evidence.example else text


def slope(values: Sequence[float | None]) -> float | None:
    """Least-squares slope of `values` against their positions 0, 1, …, skipping `None`s;
    `None` with fewer than `MIN_RUNS` values."""
    points = [(float(x), y) for x, y in enumerate(values) if y is not None]
    if len(points) < MIN_RUNS:
        return None
    mean_x = math.fsum(x for x, _ in points) / len(points)
    mean_y = math.fsum(y for _, y in points) / len(points)
    spread = math.fsum((x - mean_x) ** 2 for x, _ in points)
    return math.fsum((x - mean_x) * (y - mean_y) for x, y in points) / spread


Test = Literal["mcnemar_exact", "cochran_q"]


def discrimination(
    histories: Sequence[RunHistory], *, confidence: float = DEFAULT_CONFIDENCE
) -> Discrimination:
    """Whether the models' latest runs in `histories` (oldest first) pass different tasks."""
    latest: dict[str, RunHistory] = {}
    for history in histories:
        latest[history.run.agent] = history
    models = sorted(latest)
    verdicts: dict[str, list[bool]] = {}
    for task_id, kind in _task_order(histories):
        row = [_decided(latest[m], task_id, kind) for m in models]
        if all(v is not None for v in row):
            verdicts[task_id] = [v is True for v in row]
    rows = list(verdicts.values())
    split = [task for task, row in verdicts.items() if any(row) and not all(row)]
    test: Test | None = None
    statistic = p = None
    if len(models) < 2:
        agent = models[0] if models else UNKNOWN_AGENT
        words = f"only {agent} ran the suite in the window: run another model to tell"
    elif not rows:
        words = "no task was passed or failed by every model's latest run"
    else:
        test, statistic, p = _difference_test(rows)
        named = "exact McNemar" if test == "mcnemar_exact" else "Cochran's Q"
        words = f"{len(split)} of {_plural(len(rows), 'task')} split them ({named} p = {p:.3g})"
    discriminates = None if p is None else p < 1 - confidence
    level = confidence_text(confidence)
    if discriminates is None:
        conclusion = f"cannot tell whether the suite discriminates: {words}"
    else:
        does = "discriminates" if discriminates else "does not discriminate"
        conclusion = f"the suite {does} between the {len(models)} models at {level}: {words}"
    return Discrimination(
        models=models,
        tasks=len(rows),
        passed_tasks={m: sum(row[j] for row in rows) for j, m in enumerate(models)},
        discriminating_tasks=split,
        test=test,
        statistic=statistic,
        p_value=p,
        confidence=confidence,
        discriminates=discriminates,
        conclusion=conclusion,
    )


def _difference_test(rows: list[list[bool]]) -> tuple[Test, float | None, float]:
    """Exact McNemar for two models, Cochran's Q for more: (test, Q, p-value)."""
    if len(rows[0]) == 2:
        first_only = sum(a and not b for a, b in rows)
        second_only = sum(b and not a for a, b in rows)
        return "mcnemar_exact", None, mcnemar_exact(first_only, second_only)
    q, p = cochran_q(rows)
    return "cochran_q", q, p


def _decided(history: RunHistory, task_id: str, kind: SuiteKind) -> bool | None:
    """The task's verdict in one run: True passed, False failed, None neither (or not run)."""
    counts = history.counts.get(task_id)
    if not counts:
        return None
    verdict = task_verdict(kind, [v for v, n in counts.items() if n])
    if verdict in (Verdict.PASS, Verdict.FAIL):
        return verdict is Verdict.PASS
    return None


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
