"""Compare runs of a suite: what changed per task, and whether a later run is worse.

The first run is the baseline (A); each later run (B, C, …) is compared with it on the tasks
both planned (`trialkit.analysis.paired`, whose docstring and docs/statistics.md say which
test answers which question). A task in only one of the two, or with no decided trial in one
of them, is listed with the reason and left out of the tests. Per-task figures are the
store's SQL aggregates (`Store.load_report` listing no trial), so a run of a million trials is
counted by the database, never loaded.

`PairedComparison.outcome` is the gate's answer ("did the agent change on these tasks?", the
exact stratified test over tasks with trials as units); `suite_outcome` answers "is it better
or worse at tasks like these?" (the sign-flip test over tasks). Both are pure Python: no
extra is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import AwareDatetime

from trialkit._record import Record
from trialkit.analysis._history import run_models
from trialkit.analysis._significance import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    check_confidence,
)
from trialkit.analysis.conclusion import concluded
from trialkit.analysis.conclusion import conclusion as conclusion
from trialkit.analysis.conclusion import points as points
from trialkit.analysis.paired import Change as Change
from trialkit.analysis.paired import LeftOut as LeftOut
from trialkit.analysis.paired import Outcome as Outcome
from trialkit.analysis.paired import PairedComparison as PairedComparison
from trialkit.analysis.paired import change_of, compare_pair
from trialkit.report import Report, TaskReport
from trialkit.score import Verdict
from trialkit.task import SuiteKind

if TYPE_CHECKING:
    from trialkit.store import Store

COMPARISON_SCHEMA_VERSION = 2
"""2: the gate is the exact stratified test (`trial_test`); the difference is the mean over
tasks of task pass rate differences with a t interval (`task_test`); `left_out` lists every
task not tested. 1 pooled trials and required a bootstrap interval and McNemar to agree."""


class CompareError(ValueError):
    """The runs cannot be compared as asked (too few, or of different suites)."""


class RunColumn(Record):
    """One compared run: who ran it and its whole-run figures."""

    label: str
    """`A` for the baseline, then `B`, `C`, …"""
    id: str
    name: str | None = None
    suite_id: str
    model: str | None = None
    """The model under test: the run's setting, else its trials' model."""
    harness: str | None = None
    """The harness's name, shown when the run names no model."""
    status: str
    started_at: AwareDatetime
    tasks: int
    trials: int
    passed: int
    failed: int
    errors: int
    pass_rate: float | None
    pass_rate_ci: tuple[float, float] | None
    mean_score: float | None = None
    cost_usd: float | None = None
    cost_per_trial: float | None = None
    latency_p50_s: float | None = None

    @property
    def agent(self) -> str | None:
        """What ran: the model, else the harness."""
        return self.model or self.harness


class TaskCell(Record):
    """One task in one run."""

    verdict: Verdict
    trials: int
    passed: int
    failed: int
    errors: int
    unknown: int = 0
    pass_rate: float | None
    """Passed over decided trials; `null` when none was decided."""
    flaky: bool = False
    """Its decided trials disagree: some passed, some failed."""
    mean_score: float | None = None
    cost_per_trial: float | None = None
    latency_p50_s: float | None = None


class TaskChange(Record):
    """How one task changed from the baseline to one later run (`run` is its label)."""

    run: str
    change: Change
    pass_rate_delta: float | None = None
    mean_score_delta: float | None = None
    cost_per_trial_delta: float | None = None
    latency_p50_delta_s: float | None = None


class TaskComparison(Record):
    id: str
    kind: SuiteKind
    cells: list[TaskCell | None]
    """One per run, in the order of `Comparison.runs`; `null` where the run lacks the task."""
    changes: list[TaskChange]
    """One per run after the baseline, against the baseline."""
    file: str | None = None
    """Where the task is defined, as the latest run that knows it recorded it."""
    line: int | None = None


class Comparison(Record):
    """Runs of a suite side by side; render with `to_markdown`, `to_json`."""

    schema_version: int = COMPARISON_SCHEMA_VERSION
    runs: list[RunColumn]
    tasks: list[TaskComparison]
    pairs: list[PairedComparison]
    """Each run after the first against the first."""

    @property
    def worse(self) -> list[PairedComparison]:
        """The later runs significantly worse than the baseline."""
        return [pair for pair in self.pairs if pair.outcome == "worse"]

    def to_markdown(self) -> str:
        from trialkit.reports.compare import render_compare_markdown

        return render_compare_markdown(self)

    def to_json(self, *, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent) + "\n"


def compare_runs(
    store: Store,
    refs: Sequence[str],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    allow_different_suites: bool = False,
    report_of: Callable[[Store, str], Report] | None = None,
) -> Comparison:
    """Compare stored runs (ids, id prefixes or names); the first is the baseline.

    Reads each run's per-task aggregates from SQL and the model it used; no trial is loaded.
    `report_of(store, run_id)` gives a run's report instead (the viewer's kept reports).
    """
    if len(refs) < 2:
        raise CompareError(f"comparing needs at least two runs, got {len(refs)}")
    # Listing no trial, every task is counted and summed by the database (store/aggregates.py).
    load = report_of or (lambda store, run_id: store.load_report(run_id, max_results=0))
    reports = [load(store, store.resolve_run(ref)) for ref in refs]
    models = run_models(store, {r.run.id: r.run.config for r in reports})
    return compare_reports(
        reports,
        models=[models[r.run.id] for r in reports],
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        allow_different_suites=allow_different_suites,
    )


def is_report_file(ref: str) -> bool:
    """A run reference that is a JSON report file: a path that exists and ends in `.json`."""
    return ref.lower().endswith(".json") and Path(ref).is_file()


def load_report_ref(ref: str, store: Store | None) -> Report:
    """The report a reference names: a JSON report file (`is_report_file`), or a run of
    `store` (an id, a unique id prefix or a name). Raises `CompareError` for a file that is not
    a report, `LookupError` for a run the store does not have."""
    if is_report_file(ref):
        from trialkit.reports.json import ReportFormatError, load_json_report

        try:
            return load_json_report(Path(ref).read_bytes())
        except ReportFormatError as exc:
            raise CompareError(f"{ref}: {exc}") from None
        except OSError as exc:
            raise CompareError(f"{ref}: cannot read it: {exc.strerror}") from None
    if store is None:
        raise CompareError(f"{ref!r} is not a JSON report file, and no store was given")
    # Listing no trial, every task is counted and summed by the database (store/aggregates.py).
    return store.load_report(store.resolve_run(ref), max_results=0)


def compare_refs(
    refs: Sequence[str],
    store: Store | None,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    allow_different_suites: bool = False,
) -> Comparison:
    """Compare runs given as stored run references or JSON report files (the first is the
    baseline), so that two runs need not share a store: a run on the base branch can be the
    report file its CI job kept. `store` is needed only for stored runs."""
    if len(refs) < 2:
        raise CompareError(f"comparing needs at least two runs, got {len(refs)}")
    reports = [load_report_ref(ref, store) for ref in refs]
    stored = {
        r.run.id: r.run.config
        for ref, r in zip(refs, reports, strict=True)
        if not is_report_file(ref)
    }
    found = run_models(store, stored) if store is not None and stored else {}
    models = [found[r.run.id] if r.run.id in found else _setting(r, "model") for r in reports]
    return compare_reports(
        reports,
        models=models,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        allow_different_suites=allow_different_suites,
    )


def compare_reports(
    reports: Sequence[Report],
    *,
    models: Sequence[str | None] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    allow_different_suites: bool = False,
) -> Comparison:
    """Compare reports of runs; the first is the baseline. `models` names each run's model
    (default: the run's `model` setting). Only the reports' counts and figures are used."""
    if len(reports) < 2:
        raise CompareError(f"comparing needs at least two runs, got {len(reports)}")
    check_confidence(confidence)
    if models is None:
        models = [_setting(r, "model") for r in reports]
    if len(models) != len(reports):
        raise CompareError(f"{len(models)} models given for {len(reports)} runs")
    labels = [_label(i) for i in range(len(reports))]
    if not allow_different_suites:
        _check_one_suite(reports, labels)
    columns = [
        _column(label, report, model)
        for label, report, model in zip(labels, reports, models, strict=True)
    ]
    by_id = [{t.id: t for t in r.tasks} for r in reports]
    order = list(dict.fromkeys(t.id for r in reports for t in r.tasks))
    tasks = [_task_comparison(task_id, by_id, labels) for task_id in order]
    pairs = [
        _paired(reports[0], reports[i], labels[0], labels[i], confidence, resamples, seed)
        for i in range(1, len(reports))
    ]
    return Comparison(runs=columns, tasks=tasks, pairs=pairs)


def _label(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def _setting(report: Report, key: str) -> str | None:
    value = report.run.config.get(key)
    return str(value) if value else None


def _check_one_suite(reports: Sequence[Report], labels: Sequence[str]) -> None:
    first = reports[0].suite
    for label, report in zip(labels[1:], reports[1:], strict=True):
        if report.suite.id != first.id:
            raise CompareError(
                f"run {label} ({report.run.id}) ran suite {report.suite.id!r}, but run A "
                f"({reports[0].run.id}) ran {first.id!r}: compare runs of one suite, or allow "
                "different suites (--allow-different-suites) to pair tasks by id"
            )


def _column(label: str, report: Report, model: str | None) -> RunColumn:
    s = report.summary
    return RunColumn(
        label=label,
        id=report.run.id,
        name=report.run.name,
        suite_id=report.suite.id,
        model=model,
        harness=_setting(report, "harness"),
        status=report.run.status,
        started_at=report.run.started_at,
        tasks=s.tasks,
        trials=s.trials,
        passed=s.passed,
        failed=s.failed,
        errors=s.errors,
        pass_rate=s.pass_rate,
        pass_rate_ci=s.pass_rate_ci,
        mean_score=s.mean_score,
        cost_usd=s.cost_usd,
        cost_per_trial=_per_trial(s.cost_usd, s.trials),
        latency_p50_s=s.latency_p50_s,
    )


def _per_trial(cost: float | None, trials: int) -> float | None:
    return None if cost is None or not trials else cost / trials


def _cell(task: TaskReport) -> TaskCell:
    return TaskCell(
        verdict=task.verdict,
        trials=task.trials,
        passed=task.passed,
        failed=task.failed,
        errors=task.errors,
        unknown=task.unknown,
        pass_rate=task.pass_rate,
        flaky=task.flaky,
        mean_score=task.mean_score,
        cost_per_trial=_per_trial(task.cost_usd, task.trials),
        latency_p50_s=task.latency_p50_s,
    )


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _task_comparison(
    task_id: str, by_id: Sequence[dict[str, TaskReport]], labels: Sequence[str]
) -> TaskComparison:
    reports = [tasks.get(task_id) for tasks in by_id]
    cells = [None if t is None else _cell(t) for t in reports]
    baseline, base_cell = reports[0], cells[0]
    changes = []
    for label, task, cell in zip(labels[1:], reports[1:], cells[1:], strict=True):
        change = TaskChange(run=label, change=change_of(baseline, task))
        if base_cell is not None and cell is not None:
            change = TaskChange(
                run=label,
                change=change.change,
                pass_rate_delta=_delta(base_cell.pass_rate, cell.pass_rate),
                mean_score_delta=_delta(base_cell.mean_score, cell.mean_score),
                cost_per_trial_delta=_delta(base_cell.cost_per_trial, cell.cost_per_trial),
                latency_p50_delta_s=_delta(base_cell.latency_p50_s, cell.latency_p50_s),
            )
        changes.append(change)
    kind = next(t.kind for t in reports if t is not None)
    located = next((t for t in reversed(reports) if t is not None and t.file), None)
    return TaskComparison(
        id=task_id,
        kind=kind,
        cells=cells,
        changes=changes,
        file=None if located is None else located.file,
        line=None if located is None else located.line,
    )


def _paired(
    a: Report,
    b: Report,
    label_a: str,
    label_b: str,
    confidence: float,
    resamples: int,
    seed: int,
) -> PairedComparison:
    sa, sb = a.summary, b.summary
    whole = (
        _delta(sa.mean_score, sb.mean_score),
        _delta(_per_trial(sa.cost_usd, sa.trials), _per_trial(sb.cost_usd, sb.trials)),
        _delta(sa.latency_p50_s, sb.latency_p50_s),
    )
    pair = compare_pair(
        a,
        b,
        (label_a, label_b),
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        whole=whole,
    )
    return concluded(pair)
