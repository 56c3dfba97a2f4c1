"""Compare runs of a suite: what changed per task, and whether a later run is worse.

The first run is the baseline (A); each later run (B, C, …) is compared with it on the tasks
both planned. A task in only one of the two is listed as added or removed and left out of the
statistics. Per-task figures are the store's SQL aggregates (`Store.load_report` listing no
trial), so a run of a million trials is counted by the database, never loaded.

For each later run, over the tasks both runs planned:

- The pass rate difference B − A: passed over decided trials, pooled over the tasks with
  decided trials in both runs, as reports count it (errors are not fails: an errored trial
  counts in neither). Its interval is a percentile bootstrap over tasks: a resample draws
  tasks with replacement and takes the same tasks from both runs (paired), so how hard each
  task is cancels out. The generator is seeded: the interval is the same on every machine.
- The exact McNemar test on the task verdicts: among tasks that pass or fail in both runs, n
  new failures and m fixes. If neither run is better, each of the n + m tasks that changed is
  as likely to go either way, so p is the two-sided binomial test of n in n + m at 1/2. A task
  whose verdict is error (or unknown) in either run is reported apart and not tested.

A run is significantly worse (better) at a confidence c (95%: α = 5%) only when both agree:

1. the interval of the difference lies wholly below (above) 0, and
2. the exact McNemar test gives p < α, with more new failures than fixes (more fixes).

The bootstrap alone is not trusted: over a handful of tasks it degenerates (one task that went
from pass to fail gives an interval of −100 to −100 pts, zero wide). McNemar's test is exact for
any number of tasks, so requiring it keeps the chance of a false "significant" within α. With d
tasks changed the smallest p it can give is 2/2^d: at 95% it takes at least 6 changed tasks
(`fewest_changed`). When the interval excludes 0 but fewer tasks than that changed verdict, the
outcome is `cannot_tell`: too few tasks to tell. When the interval excludes 0 and enough tasks
changed but McNemar's p is not below α, the difference is not significant.

Only the bootstrap needs numpy (the `stats` extra). Without it the interval is left out with
the line to install it (`difference_ci_unavailable`) and the outcome is `cannot_tell`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import AwareDatetime

from trialkit._record import Record
from trialkit.analysis._deps import missing_numpy
from trialkit.analysis._history import run_models
from trialkit.analysis._significance import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    check_confidence,
    confidence_text,
    fewest_changed,
    mcnemar_exact,
    paired_bootstrap,
    pooled_difference,
)
from trialkit.report import Report, TaskReport
from trialkit.score import Verdict
from trialkit.task import SuiteKind

if TYPE_CHECKING:
    from trialkit.store import Store

COMPARISON_SCHEMA_VERSION = 1

Change = Literal["unchanged", "new_failure", "fixed", "error", "unknown", "added", "removed"]
Outcome = Literal["worse", "better", "no_difference", "cannot_tell"]


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


class PairedComparison(Record):
    """A later run (`candidate`) against the baseline, over the tasks both planned."""

    baseline: str
    candidate: str
    paired_tasks: int
    """Tasks both runs planned; only these are compared."""
    added: list[str]
    """Tasks only the candidate planned (not in the statistics)."""
    removed: list[str]
    """Tasks only the baseline planned (not in the statistics)."""
    new_failures: list[str]
    """Tasks the baseline passed and the candidate failed."""
    fixed: list[str]
    """Tasks the baseline failed and the candidate passed."""
    error_tasks: list[str]
    """Tasks whose verdict is error in either run: apart, not in the McNemar test."""
    unknown_tasks: list[str]
    """Tasks whose verdict is unknown in either run (and error in neither): not tested."""
    decided_tasks: int
    """Tasks that passed or failed in both runs: what the McNemar test looks at."""
    mcnemar_p_value: float | None
    """Exact McNemar (two-sided binomial test of new failures among changed tasks); 1 when no
    task changed, `null` when no task was decided in both runs."""
    rate_tasks: int
    """Tasks with decided trials in both runs: what the pass rates and difference cover."""
    pass_rate_baseline: float | None
    pass_rate_candidate: float | None
    difference: float | None
    """Candidate's pass rate minus the baseline's, on `rate_tasks`."""
    difference_ci: tuple[float, float] | None
    """Paired percentile bootstrap interval of `difference` over tasks, at `confidence`."""
    difference_ci_unavailable: str | None = None
    """Why `difference_ci` is `null` though `difference` is not: the line to install numpy."""
    confidence: float
    resamples: int
    seed: int
    outcome: Outcome
    """`worse` or `better` when the interval excludes 0 and the exact McNemar test agrees at
    `confidence`; `cannot_tell` when no task has decided trials in both runs, when there is no
    interval (numpy missing), or when the interval excludes 0 but too few tasks changed verdict
    for the test to confirm it; otherwise `no_difference` (not significant)."""
    conclusion: str
    """The outcome in one plain sentence."""
    mean_score_delta: float | None = None
    """Whole runs (every task of each): candidate minus baseline."""
    cost_per_trial_delta: float | None = None
    latency_p50_delta_s: float | None = None


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
    tasks_a = {t.id: t for t in a.tasks}
    tasks_b = {t.id: t for t in b.tasks}
    paired = [(tasks_a[t.id], t) for t in b.tasks if t.id in tasks_a]
    changes = {ta.id: change_of(ta, tb) for ta, tb in paired}

    def having(change: Change) -> list[str]:
        return [task for task, c in changes.items() if c == change]

    new_failures, fixed = having("new_failure"), having("fixed")
    decided = sum(c in ("unchanged", "new_failure", "fixed") for c in changes.values())
    rated = [(ta, tb) for ta, tb in paired if ta.decided and tb.decided]
    counts_a = [(ta.passed, ta.decided) for ta, _ in rated]
    counts_b = [(tb.passed, tb.decided) for _, tb in rated]
    unavailable = missing_numpy("the paired bootstrap") if rated else None
    ci = None
    if unavailable is None:
        ci = paired_bootstrap(
            counts_a, counts_b, confidence=confidence, resamples=resamples, seed=seed
        )
    difference = pooled_difference(counts_a, counts_b)
    p_value = mcnemar_exact(len(new_failures), len(fixed)) if decided else None
    sa, sb = a.summary, b.summary
    pair = PairedComparison(
        baseline=label_a,
        candidate=label_b,
        paired_tasks=len(paired),
        added=[t.id for t in b.tasks if t.id not in tasks_a],
        removed=[t.id for t in a.tasks if t.id not in tasks_b],
        new_failures=new_failures,
        fixed=fixed,
        error_tasks=having("error"),
        unknown_tasks=having("unknown"),
        decided_tasks=decided,
        mcnemar_p_value=p_value,
        rate_tasks=len(rated),
        pass_rate_baseline=_pooled(counts_a),
        pass_rate_candidate=_pooled(counts_b),
        difference=difference,
        difference_ci=ci,
        difference_ci_unavailable=unavailable,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        outcome=_outcome(ci, p_value, len(new_failures), len(fixed), confidence),
        conclusion="",
        mean_score_delta=_delta(sa.mean_score, sb.mean_score),
        cost_per_trial_delta=_delta(
            _per_trial(sa.cost_usd, sa.trials), _per_trial(sb.cost_usd, sb.trials)
        ),
        latency_p50_delta_s=_delta(sa.latency_p50_s, sb.latency_p50_s),
    )
    return pair.model_copy(update={"conclusion": conclusion(pair)})


def _pooled(counts: Sequence[tuple[int, int]]) -> float | None:
    decided = sum(d for _, d in counts)
    return sum(p for p, _ in counts) / decided if decided else None


def _outcome(
    ci: tuple[float, float] | None,
    p_value: float | None,
    new_failures: int,
    fixes: int,
    confidence: float,
) -> Outcome:
    """The rule of the module's docstring: the interval and the exact McNemar test agree."""
    if ci is None:
        return "cannot_tell"
    if ci[1] < 0:
        direction: Outcome = "worse"
    elif ci[0] > 0:
        direction = "better"
    else:
        return "no_difference"
    if new_failures + fixes < fewest_changed(confidence):
        return "cannot_tell"
    one_way = new_failures > fixes if direction == "worse" else fixes > new_failures
    confirmed = p_value is not None and p_value < 1 - confidence and one_way
    return direction if confirmed else "no_difference"


def cannot_tell_why(pair: PairedComparison) -> str:
    """Why the pair's outcome is `cannot_tell`, in a few words; empty for other outcomes."""
    if pair.outcome != "cannot_tell":
        return ""
    if pair.difference is None:
        return "no task has decided trials in both runs"
    if pair.difference_ci_unavailable is not None:
        return pair.difference_ci_unavailable
    changed = len(pair.new_failures) + len(pair.fixed)
    return (
        f"only {_plural(changed, 'task')} changed verdict, too few to tell at "
        f"{confidence_text(pair.confidence)} (it takes at least {fewest_changed(pair.confidence)})"
    )


def conclusion(pair: PairedComparison) -> str:
    """The pair's outcome in one sentence: the tasks that changed, then the pass rate."""
    a, b = pair.baseline, pair.candidate
    if pair.difference is None:
        return f"No task has decided trials in both {a} and {b}: there is nothing to compare."
    failing, fixed = len(pair.new_failures), len(pair.fixed)
    net = failing - fixed
    counted = f"{_plural(failing, 'new failure')}, {fixed} fixed"
    if net > 0:
        tasks = f"{b} is worse than {a} on {_plural(net, 'task')} ({counted})"
    elif net < 0:
        tasks = f"{b} is better than {a} on {_plural(-net, 'task')} ({counted})"
    elif failing:
        tasks = f"{b} fails {_plural(failing, 'task')} {a} passed and fixes as many"
    elif pair.decided_tasks:
        tasks = f"{b} passes and fails the same tasks as {a}"
    else:
        tasks = f"no task passed or failed in both {a} and {b}"
    level = confidence_text(pair.confidence)
    size = f"{abs(pair.difference) * 100:.1f} pts"
    change = points(pair.difference)
    moved = "does not change" if change == points(0) else f"changes by {change}"
    if pair.difference_ci is None:
        why = pair.difference_ci_unavailable
        return f"{tasks}; the pass rate {moved} (no interval: {why}): significance not decided."
    low, high = pair.difference_ci
    interval = f"{level} CI {points(low, unit='')} to {points(high)}"
    drops = "drops" if high < 0 else "rises"  # read only when the interval excludes 0
    if pair.outcome in ("worse", "better"):
        rate = f"the pass rate {drops} {size} ({interval}): significant at {level}"
    elif pair.outcome == "cannot_tell":  # too few tasks changed verdict
        rate = f"the pass rate {drops} {size} ({interval}), but {cannot_tell_why(pair)}"
    elif high < 0 or low > 0:
        rate = (
            f"the pass rate {drops} {size} ({interval}), but the exact McNemar test on the "
            f"verdicts does not confirm it (p = {pair.mcnemar_p_value:.3g}): not significant "
            f"at {level}"
        )
    else:
        rate = f"the pass rate {moved} ({interval}): not significant at {level}"
    return f"{tasks}; {rate}."


def points(value: float, *, unit: str = " pts") -> str:
    """A difference of rates in percentage points, signed: `+4.0 pts`, `−12.5 pts`, `0.0 pts`."""
    shown = f"{abs(value) * 100:.1f}"
    if float(shown) == 0:
        return f"0.0{unit}"
    return f"{'+' if value > 0 else '−'}{shown}{unit}"


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
