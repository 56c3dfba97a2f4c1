"""A finished run's report is kept in the store, and served only while the run is as it was."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from trialkit.labels import Label
from trialkit.report import Report
from trialkit.score import Verdict
from trialkit.store import Store, aggregates, kept_reports, run_figures
from trialkit.store.schema import run_reports

from ._samples import Sample, make_trial


def _finish(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    store.finish_run(_finished(sample))


def _finished(sample: Sample) -> Any:
    return sample.run.model_copy(
        update={"status": "completed", "finished_at": sample.run.started_at + timedelta(1)}
    )


def _computed(store: Store, run_id: str) -> Report:
    """The report as the aggregates give it now, the kept one left aside."""
    with store._read("test") as conn:
        return store._computed_report(conn, run_id, 0)


def _not_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the report was computed, not read")

    monkeypatch.setattr(aggregates, "load_report", refuse)


def test_a_finished_run_s_report_is_kept_and_read_back_as_computed(
    store: Store, sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finish(store, sample)
    computed = _computed(store, sample.run.id)
    with store._engine.connect() as conn:
        assert conn.execute(select(run_reports.c.run_id)).scalars().all() == [sample.run.id]

    _not_computed(monkeypatch)
    kept = store.load_report(sample.run.id, max_results=0)

    assert kept.model_dump() == computed.model_dump()
    assert kept.summary.trials == len(sample.trials)


def test_a_running_run_keeps_no_report(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    store.finish_run(sample.run)  # still "running": a checkpoint, not an end

    with store._engine.connect() as conn:
        assert conn.execute(select(run_reports)).all() == []


def test_a_label_keeps_the_kept_report_up_to_date(
    store: Store, sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finish(store, sample)
    before = store.load_report(sample.run.id, max_results=0)

    store.save_label(
        Label(run_id=sample.run.id, task_id="france", trial=1, grader="contains", verdict="pass")
    )
    computed = _computed(store, sample.run.id)
    _not_computed(monkeypatch)
    after = store.load_report(sample.run.id, max_results=0)

    assert after.model_dump() == computed.model_dump()
    assert after.task("france").passed == before.task("france").passed + 1


def test_a_run_changed_since_is_computed_again_never_served_stale(
    store: Store, sample: Sample
) -> None:
    _finish(store, sample)
    kept = store.load_report(sample.run.id, max_results=0)

    # A resume: the run runs again and stores another trial.
    store.finish_run(sample.run)
    store.save_trials([make_trial(sample.run.id, "france", 9, verdict=Verdict.FAIL)])
    changed = store.load_report(sample.run.id, max_results=0)

    assert changed.summary.trials == kept.summary.trials + 1
    assert changed.model_dump() == _computed(store, sample.run.id).model_dump()


def test_a_report_kept_by_another_trialkit_version_is_not_served(
    store: Store, sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finish(store, sample)
    with store._engine.begin() as conn:  # as if an older trialkit had kept other figures
        conn.execute(update(run_reports).values(report='{"not": "a report"}'))
    monkeypatch.setattr(kept_reports, "__version__", "0.0.0-other")

    report = store.load_report(sample.run.id, max_results=0)

    assert report.model_dump() == _computed(store, sample.run.id).model_dump()


def test_a_kept_report_that_cannot_be_read_is_computed_again(store: Store, sample: Sample) -> None:
    _finish(store, sample)
    with store._engine.begin() as conn:
        conn.execute(update(run_reports).values(report="{broken", report_packed=None))

    report = store.load_report(sample.run.id, max_results=0)

    assert report.model_dump() == _computed(store, sample.run.id).model_dump()
    assert store.load_report(sample.run.id).summary.trials == len(sample.trials)


def _figures(store: Store, run_id: str) -> tuple[Any, Any]:
    """The run's headline figures as served (kept when they can be) and as computed now."""
    with store._read("test") as conn:
        config = store.load_report(run_id, max_results=0).run.config
        served = run_figures.run_figures(conn, {run_id: config})[run_id]
        computed = run_figures.computed_figures(conn, {run_id: config})[run_id]
    return served, computed


def test_a_finished_run_s_headline_figures_are_kept_as_computed(
    store: Store, sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finish(store, sample)
    report = store.load_report(sample.run.id, max_results=0)
    served, computed = _figures(store, sample.run.id)

    assert served.latencies == (report.summary.latency_p50_s, report.summary.latency_p95_s)
    assert dataclasses.replace(served, latencies=None) == computed
    with store._engine.connect() as conn:
        kept = kept_reports.kept_figures(conn, [sample.run.id])[sample.run.id]
    assert run_figures.RunFigures.from_kept(kept) == served


def test_kept_figures_of_a_changed_run_or_unreadable_are_computed_again(
    store: Store, sample: Sample
) -> None:
    _finish(store, sample)
    store.save_trials([make_trial(sample.run.id, "france", 9, verdict=Verdict.FAIL)])
    served, computed = _figures(store, sample.run.id)
    assert served == computed and served.trials == len(sample.trials) + 1

    store.finish_run(_finished(sample))  # kept again, then spoiled
    for spoiled in ("{broken", '{"tasks": 1}', "[1, 2]"):
        with store._engine.begin() as conn:
            conn.execute(update(run_reports).values(figures=spoiled))
        served, computed = _figures(store, sample.run.id)
        assert served == computed, spoiled


def test_a_runner_s_own_report_is_kept_as_the_store_would_compute_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    from trialkit import Runner, Suite, Task, graders

    monkeypatch.setenv("TRIALKIT_TEST_KEY", "sk-kept-report-secret-0123456789")

    async def agent(prompt: str) -> str:
        n = int(prompt.split()[-1])
        if n % 5 == 4:
            raise RuntimeError("the agent broke")
        await anyio.sleep(0.001 * (n % 3))
        return "Paris" if n % 3 else "Berlin"

    suite = Suite(
        id="kept",
        kind="capability",
        trials=4,
        harness=agent,
        tasks=[
            Task(id=f"t{i}", input=f"q {i}", tags=["a"], graders=[graders.contains("paris")])
            for i in range(7)
        ],
    )
    computed_calls: list[str] = []
    compute = store._computed_report

    def counted(conn: Any, run_id: str, max_results: int) -> Report:
        computed_calls.append(run_id)
        return compute(conn, run_id, max_results)

    monkeypatch.setattr(store, "_computed_report", counted)
    runner = Runner(store=store, name="nightly sk-kept-report-secret-0123456789")
    report = anyio.run(runner.run, suite)
    assert computed_calls == []  # the runner's own report was kept: nothing computed
    monkeypatch.setattr(store, "_computed_report", compute)

    kept = store.load_report(report.run.id, max_results=0)
    assert kept.model_dump() == _computed(store, report.run.id).model_dump()
    assert kept.summary.errors > 0 and kept.summary.failed > 0 and kept.summary.passed > 0
    with store._engine.connect() as conn:
        text = conn.execute(select(run_reports.c.report)).scalar_one()
    assert "sk-kept-report-secret" not in str(text)


def test_a_report_that_misses_stored_trials_is_computed_instead(
    store: Store, sample: Sample
) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    partial = {p.id: [] for p in sample.plans}  # a process that ran none of them
    from trialkit.report import build_report

    made = build_report(_finished(sample), sample.suite, sample.plans, partial)
    store.finish_run(_finished(sample), report=made)

    kept = store.load_report(sample.run.id, max_results=0)
    assert kept.summary.trials == len(sample.trials) > 0
    assert kept.model_dump() == _computed(store, sample.run.id).model_dump()


@pytest.mark.parametrize("max_results", [1, 3, 20])
def test_a_kept_report_with_its_listed_trials_is_the_report_computed(
    store: Store, sample: Sample, monkeypatch: pytest.MonkeyPatch, max_results: int
) -> None:
    _finish(store, sample)
    with store._read("test") as conn:
        computed = store._computed_report(conn, sample.run.id, max_results)
    assert any(t.results for t in computed.tasks)
    assert any(t.results_omitted for t in computed.tasks) == (max_results == 1)

    _not_computed(monkeypatch)
    report = store.load_report(sample.run.id, max_results=max_results)

    assert report.model_dump() == computed.model_dump()
