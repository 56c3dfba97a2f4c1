"""Several writers on one store (threads and processes), and a store shared between threads."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

from sqlalchemy import func, select

from trialkit.store import Store
from trialkit.store.migrations import MIGRATIONS, applied_migrations
from trialkit.store.schema import scores

from ._samples import make_sample, make_trial

BATCHES = 20
PER_BATCH = 10


def _write_run(
    url: str, run_id: str, start: threading.Barrier, errors: list[BaseException]
) -> None:
    try:
        with Store(url) as store:
            sample = make_sample(run_id)
            store.create_run(sample.run, sample.suite, sample.plans)
            start.wait()
            for batch in range(BATCHES):
                store.save_trials(
                    [make_trial(run_id, "france", batch * PER_BATCH + i) for i in range(PER_BATCH)]
                )
                store.list_runs()
    except BaseException as exc:
        errors.append(exc)


def test_two_stores_on_one_file_write_concurrently_without_loss(db_url: str) -> None:
    Store(db_url).close()
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_write_run, args=(db_url, run_id, start, errors))
        for run_id in ("left", "right")
    ]

    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    with Store(db_url) as store:
        counts = {r.id: r.trials for r in store.list_runs()}
        assert counts == {"left": BATCHES * PER_BATCH, "right": BATCHES * PER_BATCH}
        indexes = [t.index for t in store.iter_trials("left")]
        assert sorted(indexes) == list(range(BATCHES * PER_BATCH))


def test_one_store_saves_from_a_worker_thread_while_the_main_thread_reads(
    store: Store,
) -> None:
    sample = make_sample("shared")
    store.create_run(sample.run, sample.suite, sample.plans)
    errors: list[BaseException] = []

    def save() -> None:
        try:
            for batch in range(BATCHES):
                store.save_trials([make_trial("shared", "json", batch)])
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=save)
    worker.start()
    while worker.is_alive():
        store.list_runs()
        store.load_report("shared")
    worker.join()

    assert errors == []
    assert store.list_runs()[0].trials == BATCHES


def test_an_in_memory_store_is_shared_between_threads() -> None:
    with Store("sqlite://") as store:
        sample = make_sample("mem")
        store.create_run(sample.run, sample.suite, sample.plans)
        worker = threading.Thread(target=store.save_trials, args=(sample.trials,))
        worker.start()
        worker.join()

        assert list(store.iter_trials("mem")) == sorted(
            sample.trials, key=lambda t: (t.task_id, t.index)
        )


def _save_in_process(url: str, run_id: str, start: Any, rounds: int) -> None:
    """Opens the store (migrating it if it is new), then saves trials 0-49 of `run_id`, again
    and again: the writers' keys collide, and each save replaces what the other saved."""
    trials = [make_trial(run_id, "france", i) for i in range(50)]
    start.wait(timeout=60)
    with Store(url) as store:
        for _ in range(rounds):
            store.save_trials(trials)


def test_processes_saving_the_same_trials_at_once_replace_them_without_errors(
    db_url: str,
) -> None:
    with Store(db_url) as store:
        sample = make_sample("shared")
        store.create_run(sample.run, sample.suite, sample.plans)
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(2)
    writers = [
        spawn.Process(target=_save_in_process, args=(db_url, "shared", start, 20)) for _ in range(2)
    ]

    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)

    assert [w.exitcode for w in writers] == [0, 0]
    with Store(db_url) as store:
        assert store.list_runs()[0].trials == 50
        with store._engine.connect() as conn:
            assert conn.scalar(select(func.count()).select_from(scores)) == 50


def test_processes_opening_a_new_store_at_once_migrate_it_once(db_url: str) -> None:
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(3)
    openers = [
        spawn.Process(target=_save_in_process, args=(db_url, "none", start, 0)) for _ in range(3)
    ]

    for opener in openers:
        opener.start()
    for opener in openers:
        opener.join(timeout=120)

    assert [o.exitcode for o in openers] == [0, 0, 0]
    with Store(db_url) as store, store._engine.connect() as conn:
        assert applied_migrations(conn) == [m.__name__ for m in MIGRATIONS]
