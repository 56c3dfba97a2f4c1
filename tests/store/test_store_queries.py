"""Listing runs with their counts, and finding a run by id, id prefix or name."""

from __future__ import annotations

from datetime import timedelta

import pytest

from trialkit.score import Verdict
from trialkit.store import AmbiguousRun, RunNotFound, RunSummary, Store
from trialkit.store.urls import mask_url

from ._samples import T0, Sample, make_sample, make_trial


def _add_run(store: Store, run_id: str, *, name: str | None = None, hours: int = 0) -> Sample:
    sample = make_sample(run_id, name=name, started_at=T0 + timedelta(hours=hours))
    store.create_run(sample.run, sample.suite, sample.plans)
    return sample


def test_list_runs_counts_tasks_and_trials_by_verdict(store: Store, sample: Sample) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials)

    [summary] = store.list_runs()

    assert summary == RunSummary(
        id="run-abc123",
        name="nightly",
        suite_id="capitals",
        suite_kind="mixed",
        status="running",
        started_at=T0,
        finished_at=None,
        tasks=4,
        trials=5,
        passed=2,
        failed=1,
        errors=2,
        pass_rate=2 / 3,
    )


def test_list_runs_is_newest_first_and_limited(store: Store) -> None:
    for hours, run_id in enumerate(["a1", "b2", "c3", "d4"]):
        _add_run(store, run_id, hours=hours)

    assert [r.id for r in store.list_runs()] == ["d4", "c3", "b2", "a1"]
    assert [r.id for r in store.list_runs(limit=2)] == ["d4", "c3"]
    assert len(store.list_runs(limit=None)) == 4


def test_a_run_without_trials_has_zero_counts_and_no_pass_rate(store: Store) -> None:
    _add_run(store, "empty")
    other = _add_run(store, "busy", hours=1)
    store.save_trials([make_trial(other.run.id, "france", i) for i in range(3)])

    by_id = {r.id: r for r in store.list_runs()}

    assert (by_id["empty"].tasks, by_id["empty"].trials, by_id["empty"].pass_rate) == (4, 0, None)
    assert (by_id["busy"].trials, by_id["busy"].passed, by_id["busy"].pass_rate) == (3, 3, 1.0)


def test_a_run_with_only_errors_has_no_pass_rate(store: Store) -> None:
    sample = _add_run(store, "broken")
    store.save_trials([make_trial(sample.run.id, "france", 0, verdict=Verdict.ERROR)])

    [summary] = store.list_runs()

    assert (summary.errors, summary.pass_rate) == (1, None)


def test_resolve_run_by_exact_id(store: Store) -> None:
    _add_run(store, "abc")
    _add_run(store, "abcd")

    assert store.resolve_run("abc") == "abc"


def test_resolve_run_by_unique_id_prefix(store: Store) -> None:
    _add_run(store, "20250301-a1b2")
    _add_run(store, "20250302-c3d4")

    assert store.resolve_run("20250301") == "20250301-a1b2"


def test_id_prefixes_are_case_sensitive(store: Store) -> None:
    _add_run(store, "abc1")

    with pytest.raises(RunNotFound):
        store.resolve_run("ABC")


def test_id_prefixes_are_not_patterns(store: Store) -> None:
    _add_run(store, "run_1")
    _add_run(store, "runx1")

    assert store.resolve_run("run_") == "run_1"
    with pytest.raises(RunNotFound):
        store.resolve_run("%1")


def test_resolve_run_by_name_picks_the_latest_run_with_that_name(store: Store) -> None:
    _add_run(store, "r1", name="nightly", hours=0)
    _add_run(store, "r2", name="nightly", hours=2)
    _add_run(store, "r3", name="other", hours=3)

    assert store.resolve_run("nightly") == "r2"


def test_an_ambiguous_prefix_lists_the_candidates(store: Store) -> None:
    _add_run(store, "ab-1", name="first")
    _add_run(store, "ab-2", hours=1)

    with pytest.raises(AmbiguousRun) as caught:
        store.resolve_run("ab")

    message = str(caught.value)
    assert "'ab' is ambiguous" in message
    assert "ab-2, ab-1 (first)" in message
    assert "\n" not in message


def test_a_name_wins_over_an_ambiguous_prefix(store: Store) -> None:
    _add_run(store, "nightly-1", name="nightly")
    _add_run(store, "nightly-2", name="nightly", hours=1)

    assert store.resolve_run("nightly") == "nightly-2"


def test_an_unknown_ref_is_run_not_found_with_a_hint(store: Store, db_url: str) -> None:
    _add_run(store, "abc")

    with pytest.raises(RunNotFound) as caught:
        store.resolve_run("zzz")

    message = str(caught.value)
    assert "no run matches 'zzz'" in message
    assert "trialkit runs" in message
    assert mask_url(db_url) in message
    with pytest.raises(RunNotFound, match="no run given"):
        store.resolve_run("")
