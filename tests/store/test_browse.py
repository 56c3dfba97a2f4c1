"""The viewer's queries (`trialkit.store.browse`) on SQLite and PostgreSQL: figures equal the
stored report's, sorts, filters and paging totals, trends, history strips and the matrix."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from trialkit import Suite, Task, graders, run_sync
from trialkit.report import Report
from trialkit.score import Verdict
from trialkit.store import Store
from trialkit.store.browse import (
    OUTPUT_CHARS,
    RunRow,
    facets,
    list_runs,
    matrix,
    suite_trend,
    task_history,
)
from trialkit.store.queries import list_trials
from trialkit.store.trial_pages import trials_page

from .test_store_reports import _save, _varied_run

DAY = timedelta(days=1)


def _agent(every_error: int = 5, every_fail: int = 3) -> object:
    """A function harness: mostly right, wrong every `every_fail`-th call, raising on some."""
    calls = itertools.count()

    def agent(prompt: str) -> str:
        n = next(calls)
        if n % every_error == every_error - 1:
            raise RuntimeError("agent crashed")
        return "Berlin " * 200 if n % every_fail == 0 else f"Paris, for {prompt}"

    return agent


def _suite(suite_id: str, kind: str, *, trials: int = 3, tasks: int = 4) -> Suite:
    return Suite(
        id=suite_id,
        kind=kind,  # type: ignore[arg-type]
        trials=trials,
        harness=_agent(),
        tasks=[
            Task(id=f"task-{i}", input=f"capital {i}?", graders=[graders.contains("paris")])
            for i in range(tasks)
        ],
    )


def _run(store: Store, suite: Suite, name: str | None = None) -> Report:
    return run_sync(suite, store=store, concurrency=1, name=name)


def _agrees(row: RunRow, report: Report) -> None:
    summary = report.summary
    assert (row.tasks, row.trials, row.passed, row.failed, row.errors) == (
        summary.tasks,
        summary.trials,
        summary.passed,
        summary.failed,
        summary.errors,
    )
    assert row.pass_rate == summary.pass_rate
    assert row.pass_rate_ci == summary.pass_rate_ci
    assert row.k is not None and row.k == max(map(int, summary.pass_hat_k))
    assert row.pass_hat_k == summary.pass_hat_k[str(row.k)]
    assert row.cost_usd == summary.cost_usd
    assert row.duration_s == summary.duration_s
    assert row.started_at == report.run.started_at


@pytest.fixture
def filled(store: Store) -> dict[str, Report]:
    """Runs of a capability suite, a regression suite and a scripted-model suite, and a sample
    run with costs whose naive sum is inexact."""
    reports = {
        "cap-1": _run(store, _suite("caps", "capability"), name="nightly"),
        "cap-2": _run(store, _suite("caps", "capability", trials=4), name="nightly"),
        "reg": _run(store, _suite("regs", "regression", trials=2, tasks=6), name="pr-42"),
        "chat": _run(
            store,
            Suite(
                id="chat",
                kind="regression",
                trials=2,
                model="scripted/echo",
                tasks=[Task(id="echo", input="paris", graders=[graders.contains("paris")])],
            ),
        ),
    }
    for key, seed in (("varied", 3), ("costly", 5)):
        sample = _varied_run(seed=seed)
        if key == "costly":  # every cost known
            sample.run = sample.run.model_copy(update={"started_at": sample.run.started_at + DAY})
            sample.trials = [
                t if t.cost_usd is not None else t.model_copy(update={"cost_usd": 0.3})
                for t in sample.trials
            ]
        _save(store, sample)
        finished = sample.run.model_copy(
            update={"status": "completed", "finished_at": sample.run.started_at + DAY}
        )
        store.finish_run(finished)
        reports[key] = store.load_report(sample.run.id)
    return reports


def test_each_run_s_figures_equal_its_stored_report(
    store: Store, filled: dict[str, Report]
) -> None:
    page = list_runs(store)
    assert page.total == len(filled)
    by_id = {row.id: row for row in page.rows}
    for report in filled.values():
        _agrees(by_id[report.run.id], store.load_report(report.run.id))
    assert filled["varied"].summary.cost_usd is None
    assert filled["costly"].summary.cost_usd is not None
    assert by_id[filled["chat"].run.id].model == "scripted/echo"
    assert by_id[filled["chat"].run.id].harness == "chat"
    assert by_id[filled["reg"].run.id].harness == "_agent.<locals>.agent"
    assert by_id[filled["cap-1"].run.id].errors > 0


def test_sorts_put_runs_in_order_and_runs_without_a_figure_last(
    store: Store, filled: dict[str, Report]
) -> None:
    newest = [r.id for r in list_runs(store).rows]
    starts = [r.started_at for r in list_runs(store).rows]
    assert starts == sorted(starts, reverse=True)
    assert [r.id for r in list_runs(store, descending=False).rows] == newest[::-1]
    for sort, figure in [
        ("pass_rate", lambda r: r.pass_rate),
        ("errors", lambda r: r.errors),
        ("duration", lambda r: r.duration_s),
        ("name", lambda r: r.name),
        ("suite", lambda r: r.suite_id),
    ]:
        for descending in (True, False):
            found = list_runs(store, sort=sort, descending=descending).rows  # type: ignore[arg-type]
            known = [figure(r) for r in found if figure(r) is not None]
            assert known == sorted(known, reverse=descending), sort
            assert [figure(r) is None for r in found] == sorted(figure(r) is None for r in found), (
                sort
            )
    by_cost = list_runs(store, sort="cost").rows
    assert by_cost[0].id == filled["costly"].run.id


def test_runs_sort_by_duration_to_the_microsecond(store: Store) -> None:
    """Durations a few hundred microseconds apart, across a second's boundary, sort in order
    (SQLite's own date functions see milliseconds only)."""
    lengths = [1_100, 1_900, 1_500, 999_999, 1_000_001, 250]
    for n, micros in enumerate(lengths):
        sample = _varied_run(seed=n)
        start = sample.run.started_at.replace(microsecond=999_700 - n)
        sample.run = sample.run.model_copy(update={"started_at": start})
        _save(store, sample)
        end = start + timedelta(microseconds=micros)
        store.finish_run(sample.run.model_copy(update={"status": "completed", "finished_at": end}))
    for descending in (True, False):
        found = list_runs(store, sort="duration", descending=descending).rows
        durations = [r.duration_s for r in found]
        assert durations == sorted((m / 1e6 for m in lengths), reverse=descending)


def test_filters_and_paging(store: Store, filled: dict[str, Report]) -> None:
    assert {r.id for r in list_runs(store, suite="caps").rows} == {
        filled["cap-1"].run.id,
        filled["cap-2"].run.id,
    }
    assert list_runs(store, name="NIGHT").total == 2
    assert list_runs(store, name="%").total == 0  # a LIKE wildcard is a plain character
    assert [r.id for r in list_runs(store, model="scripted/echo").rows] == [filled["chat"].run.id]
    assert list_runs(store, status="completed").total == len(filled)
    assert list_runs(store, status="running").total == 0
    start = filled["reg"].run.started_at
    since = list_runs(store, since=start)
    assert filled["reg"].run.id in {r.id for r in since.rows}
    assert all(r.started_at >= start for r in since.rows)
    assert all(r.started_at <= start for r in list_runs(store, until=start).rows)
    pages = [list_runs(store, offset=i, limit=2) for i in (0, 2, 4)]
    assert [p.total for p in pages] == [len(filled)] * 3
    ids = [r.id for p in pages for r in p.rows]
    assert ids == [r.id for r in list_runs(store).rows]


def test_facets(store: Store, filled: dict[str, Report]) -> None:
    found = facets(store)
    assert found.suites == ["capitals", "caps", "chat", "regs"]
    assert found.models == ["scripted/echo"]
    assert found.names == ["nightly", "pr-42"]
    assert found.statuses == ["completed"]


def test_a_suite_s_trend_is_oldest_first_with_the_report_s_figures(
    store: Store, filled: dict[str, Report]
) -> None:
    points = suite_trend(store, "caps")
    assert [p.run_id for p in points] == [filled["cap-1"].run.id, filled["cap-2"].run.id]
    for point, key in zip(points, ["cap-1", "cap-2"], strict=True):
        summary = store.load_report(point.run_id).summary
        assert (point.pass_rate, point.pass_rate_ci, point.errors) == (
            summary.pass_rate,
            summary.pass_rate_ci,
            summary.errors,
        )
        assert point.pass_hat_k == summary.pass_hat_k[str(point.k)]
        assert (point.latency_p50_s, point.latency_p95_s) == (
            summary.latency_p50_s,
            summary.latency_p95_s,
        )
        assert point.mean_latency_s is not None and point.mean_latency_s > 0
        assert point.name == filled[key].run.name
    assert [p.run_id for p in suite_trend(store, "caps", limit=1)] == [filled["cap-2"].run.id]
    assert suite_trend(store, "no-such-suite") == []


def test_a_task_history_strip_has_each_run_s_task_verdict(
    store: Store, filled: dict[str, Report]
) -> None:
    history = task_history(store, "caps")
    assert history.runs == [filled["cap-1"].run.id, filled["cap-2"].run.id]
    for strip in history.tasks:
        expected = [filled[k].task(strip.task_id).verdict for k in ("cap-1", "cap-2")]
        assert strip.verdicts == expected
    older, newer = filled["varied"], filled["costly"]
    varied = task_history(store, "capitals")
    assert varied.runs == [older.run.id, newer.run.id]
    assert [s.task_id for s in varied.tasks] == [t.id for t in newer.tasks]
    assert [s.verdicts for s in varied.tasks] == [
        [a.verdict, b.verdict] for a, b in zip(older.tasks, newer.tasks, strict=True)
    ]
    assert task_history(store, "caps", runs=1).runs == [filled["cap-2"].run.id]


def test_the_matrix_of_tasks_by_runs(store: Store, filled: dict[str, Report]) -> None:
    runs = [filled["reg"].run.id, filled["cap-1"].run.id]
    found = matrix(store, runs)
    assert found.total == 6  # the regression suite's six tasks; caps' four share their ids
    assert [row.task_id for row in found.rows] == [f"task-{i}" for i in range(6)]
    for row in found.rows:
        for run_key, cell in zip(["reg", "cap-1"], row.cells, strict=True):
            report = filled[run_key]
            if row.task_id not in {t.id for t in report.tasks}:
                assert cell is None
                continue
            task = report.task(row.task_id)
            assert cell is not None
            assert (cell.passed, cell.trials, cell.verdict) == (
                task.passed,
                task.trials,
                task.verdict,
            )
            first = store.load_trial(report.run.id, row.task_id, 0)
            assert cell.output_trial == 0
            output = first.outcome.output
            if output is not None and len(output) > OUTPUT_CHARS:
                output = output[:OUTPUT_CHARS] + "…"
            assert cell.output == output
    page = matrix(store, runs, offset=4, limit=10)
    assert (page.total, [r.task_id for r in page.rows]) == (6, ["task-4", "task-5"])
    assert matrix(store, runs, task="TASK-1").total == 1
    assert [r.task_id for r in matrix(store, runs, task="task-[1").rows] == []
    assert [r.task_id for r in matrix(store, runs, task="*-?").rows][:2] == ["task-0", "task-1"]
    assert matrix(store, runs, task="*5").total == 1
    assert matrix(store, runs, task="_").total == 0
    assert matrix(store, []).rows == []


def test_an_errored_trial_is_counted_apart_from_failures(
    store: Store, filled: dict[str, Report]
) -> None:
    row = next(r for r in list_runs(store).rows if r.id == filled["reg"].run.id)
    report = filled["reg"]
    assert row.errors == report.summary.errors > 0
    assert row.failed == report.summary.failed > 0
    verdicts = {t.verdict for t in report.tasks}
    assert Verdict.ERROR in verdicts or Verdict.FAIL in verdicts


def test_a_page_of_trials_is_the_listing_s_slice(store: Store, filled: dict[str, Report]) -> None:
    for key in ("reg", "costly"):
        run_id = filled[key].run.id
        some = sorted({line.task_id for line in list_trials(store, run_id).lines})[1::2]
        for verdict, tasks in [(None, None), (Verdict.FAIL, None), (None, some)]:
            whole = list_trials(store, run_id, verdict=verdict, tasks=tasks)
            pages = [
                trials_page(store, run_id, verdict=verdict, tasks=tasks, offset=i, limit=5)
                for i in (0, 5, 10)
            ]
            assert all(p.total == whole.total for p in pages)
            paged = [line for p in pages for line in p.lines]
            assert paged == whole.lines[:15]
    assert trials_page(store, filled["reg"].run.id, offset=1000).lines == []


def test_a_suite_s_health_findings_are_reachable_from_browse(
    store: Store, filled: dict[str, Report]
) -> None:
    from trialkit.store.browse import suite_health

    health = suite_health(store, "caps")
    assert [r.id for r in health.runs] == [filled["cap-1"].run.id, filled["cap-2"].run.id]
