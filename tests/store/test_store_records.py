"""Records survive the store: trials in full, and reports rebuilt from stored rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select

from trialkit.report import RunInfo, TrialResult, build_report
from trialkit.score import Score, Verdict
from trialkit.store import RunNotFound, Store, StoreError, TrialNotFound
from trialkit.store.schema import scores
from trialkit.trial import TrialStatus

from ._samples import Sample, make_trial


def _saved(store: Store, sample: Sample) -> Sample:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)
    return sample


def test_a_trial_comes_back_equal_to_what_was_saved(store: Store, sample: Sample) -> None:
    _saved(store, sample)

    for trial in sample.trials:
        loaded = store.load_trial(trial.run_id, trial.task_id, trial.index)
        assert loaded == trial
        assert loaded.model_dump() == trial.model_dump()


def test_datetimes_keep_their_instant_to_the_microsecond(store: Store, sample: Sample) -> None:
    _saved(store, sample)
    tools = next(t for t in sample.trials if t.task_id == "tools")

    loaded = store.load_trial(tools.run_id, "tools", 0)

    assert loaded.started_at == tools.started_at
    assert loaded.started_at.utcoffset() == timedelta(0)
    assert loaded.started_at.microsecond == 1
    assert loaded.transcript.timing.started_at == tools.transcript.timing.started_at


def test_iter_trials_streams_every_trial_in_task_then_index_order(
    store: Store, sample: Sample
) -> None:
    _saved(store, sample)

    streamed = list(store.iter_trials(sample.run.id))

    assert streamed == sorted(sample.trials, key=lambda t: (t.task_id, t.index))


def test_the_stored_report_equals_the_report_built_in_memory(store: Store, sample: Sample) -> None:
    _saved(store, sample)
    finished = sample.run.model_copy(
        update={
            "status": "completed",
            "finished_at": sample.run.started_at + timedelta(seconds=42.5),
            "config": {"trials": 2, "concurrency": 8, "tasks": ["france", "json"]},
        }
    )
    store.finish_run(finished)
    results: dict[str, list[TrialResult]] = {}
    for trial in sample.trials:
        results.setdefault(trial.task_id, []).append(TrialResult.from_trial(trial))
    expected = build_report(finished, sample.suite, sample.plans, results)

    report = store.load_report(sample.run.id)

    assert report.model_dump() == expected.model_dump()
    assert [t.id for t in report.tasks] == ["france", "json", "tools", "never-ran"]
    output = report.task("france").results[0].output
    assert output is not None
    assert output.endswith("…")


def test_finish_run_records_status_end_and_config(store: Store, sample: Sample) -> None:
    _saved(store, sample)
    end = datetime(2025, 3, 1, 12, 5, tzinfo=UTC)
    store.finish_run(
        sample.run.model_copy(
            update={"status": "interrupted", "finished_at": end, "config": {"x": [1]}}
        )
    )

    run = store.load_report(sample.run.id).run

    assert (run.status, run.finished_at, run.config) == ("interrupted", end, {"x": [1]})


def test_finish_run_of_an_unknown_run_is_run_not_found(store: Store) -> None:
    run = RunInfo(id="nope", started_at=datetime.now(UTC))

    with pytest.raises(RunNotFound, match="'nope'"):
        store.finish_run(run)


def test_saving_a_trial_again_replaces_it_and_its_scores(store: Store, sample: Sample) -> None:
    _saved(store, sample)
    errored = next(t for t in sample.trials if t.task_id == "json" and t.index == 1)
    retried = make_trial(
        errored.run_id,
        "json",
        1,
        scores=[Score.from_bool(True, name="valid_json"), Score.from_bool(True, name="judge")],
    )

    store.save_trials([retried])

    assert store.load_trial(errored.run_id, "json", 1) == retried
    with store._engine.connect() as conn:
        names = conn.execute(
            select(scores.c.name)
            .where(scores.c.task_id == "json", scores.c.trial_idx == 1)
            .order_by(scores.c.position)
        ).scalars()
        assert list(names) == ["valid_json", "judge"]
    summary = store.list_runs()[0]
    assert (summary.trials, summary.passed, summary.errors) == (5, 3, 1)


def test_within_one_batch_the_last_trial_with_a_key_wins(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    first = make_trial(sample.run.id, "france", 0, verdict=Verdict.FAIL)
    second = make_trial(sample.run.id, "france", 0, verdict=Verdict.PASS, output="Paris")

    store.save_trials([first, second])

    assert store.load_trial(sample.run.id, "france", 0) == second


def test_scores_get_one_row_each(store: Store, sample: Sample) -> None:
    _saved(store, sample)

    with store._engine.connect() as conn:
        count = conn.scalar(select(func.count()).select_from(scores))

    assert count == sum(len(t.scores) for t in sample.trials)


def test_missing_trials_and_runs_are_lookup_errors(store: Store, sample: Sample) -> None:
    _saved(store, sample)

    with pytest.raises(TrialNotFound, match="france#7"):
        store.load_trial(sample.run.id, "france", 7)
    with pytest.raises(RunNotFound, match="'other'"):
        store.load_trial("other", "france", 0)
    with pytest.raises(RunNotFound, match="'other'"):
        store.load_report("other")
    with pytest.raises(RunNotFound, match="'other'"):
        store.iter_trials("other")


def test_creating_a_run_twice_is_an_error(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)

    with pytest.raises(StoreError, match="run 'run-abc123' already exists"):
        store.create_run(sample.run, sample.suite, sample.plans)


def test_saving_trials_of_a_run_never_created_is_an_error(store: Store) -> None:
    with pytest.raises(StoreError, match="cannot save trials of run 'ghost'"):
        store.save_trials([make_trial("ghost", "t", 0)])


def test_naive_datetimes_are_refused_before_they_reach_the_store(sample: Sample) -> None:
    with pytest.raises(ValidationError, match="timezone info"):
        make_trial(sample.run.id, "france", 0, started_at=datetime(2025, 1, 1))


def test_an_empty_batch_is_a_no_op(store: Store) -> None:
    store.save_trials([])

    assert store.list_runs() == []


def test_a_trial_with_no_output_and_no_scores_round_trips(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    bare = make_trial(sample.run.id, "tools", 3, status=TrialStatus.ERROR, output=None, scores=[])

    store.save_trials([bare])

    assert store.load_trial(sample.run.id, "tools", 3) == bare
