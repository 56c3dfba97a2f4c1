"""The writer process: a large run's trials saved by a process of its own.

What it stores must be what the run's own process would have stored, secrets it learns late
included; the store's refusals must reach the run as they would have; and when the writer
cannot do its part (it never starts, or dies mid-run), the run's process saves the trials
itself, so nothing is lost.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from trialkit import Runner, Suite, Task, graders
from trialkit.secrets import register_secret
from trialkit.store import Store, writer_process
from trialkit.store.errors import StoreError
from trialkit.store.urls import sqlite_url
from trialkit.store.writer_process import MODE_ENV_VAR, WriterProcess, serve, wanted

from ._samples import Sample, make_sample, make_trial


def _stored(store: Store, run_id: str) -> list[dict[str, object]]:
    return [t.model_dump(mode="json", exclude={"run_id"}) for t in store.iter_trials(run_id)]


def test_it_stores_exactly_what_the_run_s_process_would(store: Store, sample: Sample) -> None:
    twin = make_sample("run-twin")
    for one in (sample, twin):
        store.create_run(one.run, one.suite, one.plans)
    store.save_trials(sample.trials)
    writer = WriterProcess(store)
    try:
        for _ in range(50):  # batches before it is ready are saved here: wait for it
            if writer._ready:
                break
            anyio.run(writer.save_trials, twin.trials[:1])
            anyio.run(anyio.sleep, 0.1)
        assert writer._ready and writer.alive
        anyio.run(writer.save_trials, twin.trials)
    finally:
        writer.close()
    assert writer.alive  # it did the work, not the fallback
    assert _stored(store, twin.run.id) == _stored(store, sample.run.id)


def test_a_batch_bigger_than_the_pipe_is_sent_in_parts(store: Store) -> None:
    """A batch the pipe cannot hold at once (over 1 MiB) is written as the writer reads it,
    the event loop waiting for room in between."""
    sample = make_sample("run-big")
    store.create_run(sample.run, sample.suite, sample.plans)
    big = [
        make_trial("run-big", "france", i, output=f"{i} " + "long answer " * 50_000)
        for i in range(4)
    ]
    writer = WriterProcess(store)
    try:
        _wait_ready(writer, store)
        anyio.run(writer.save_trials, big)
        assert writer.alive
    finally:
        writer.close()
    stored = {t.index: t.outcome.output for t in store.iter_trials("run-big")}
    assert stored == {t.index: t.outcome.output for t in big}


def test_the_store_s_refusal_reaches_the_run_as_it_would_have(store: Store) -> None:
    sample = make_sample("run-never-created")  # no run row: the foreign key refuses the trials
    with pytest.raises(StoreError) as here:
        store.save_trials(sample.trials)
    writer = WriterProcess(store)
    try:
        _wait_ready(writer, store)
        with pytest.raises(StoreError) as there:
            anyio.run(writer.save_trials, sample.trials)
        assert writer.alive  # a refusal is the store's answer, not the writer's failure
    finally:
        writer.close()
    assert str(there.value) == str(here.value)


def _wait_ready(writer: WriterProcess, store: Store) -> None:
    """Save a throwaway batch until the writer takes one itself (it starts in the background)."""
    warm = make_sample("run-warm-up")
    store.create_run(warm.run, warm.suite, warm.plans)
    for _ in range(100):
        anyio.run(writer.save_trials, warm.trials[:1])
        if writer._ready:
            return
        anyio.run(anyio.sleep, 0.05)
    raise AssertionError("the writer process never became ready")


def _suite(trials: int, agent: object) -> Suite:
    return Suite(
        id="writer",
        trials=trials,
        harness=agent,
        tasks=[Task(id=f"t{i}", input=f"q{i}", graders=[graders.contains("ok")]) for i in range(4)],
    )


def _children_running_the_writer() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and b"writer_process" in command:
            found.append(int(entry.name))
    return found


def test_a_run_through_the_writer_stores_every_trial_and_a_late_secret_redacted(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV_VAR, "process")
    secret = "sk-late-" + "7" * 32
    seen: list[int] = []

    async def agent(prompt: str) -> str:
        seen.append(len(_children_running_the_writer()))
        register_secret(secret)  # learned mid-run, after the writer started
        await anyio.sleep(0.01)
        return f"ok {prompt} {secret}"

    with Store(db_url) as store:
        report = anyio.run(Runner(store=store, concurrency=4).run, _suite(30, agent))
        trials = list(store.iter_trials(report.run.id))
    assert max(seen) == 1  # one writer process, during the run
    assert _children_running_the_writer() == []  # and gone after it
    assert report.summary.trials == report.summary.passed == 120
    assert len(trials) == 120
    assert all(secret not in (t.outcome.output or "") for t in trials)
    assert all("[REDACTED]" in (t.outcome.output or "") for t in trials)


def test_a_writer_that_dies_mid_run_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV_VAR, "process")
    killed: list[int] = []

    async def agent(prompt: str) -> str:
        await anyio.sleep(0.005)
        running = _children_running_the_writer()
        if running and not killed and len(calls) > 60:
            os.kill(running[0], signal.SIGKILL)
            killed.append(running[0])
        calls.append(prompt)
        return "ok"

    calls: list[str] = []
    db = tmp_path / "store.db"
    with Store(sqlite_url(db)) as store:
        report = anyio.run(Runner(store=store, concurrency=4).run, _suite(50, agent))
        stored = list(store.iter_trials(report.run.id))
    assert killed, "the writer process was never seen running"
    assert report.summary.trials == report.summary.passed == 200
    assert sorted((t.task_id, t.index) for t in stored) == sorted(
        (f"t{i}", n) for i in range(4) for n in range(50)
    )


def test_a_writer_that_cannot_start_leaves_the_saving_to_the_run(
    store: Store, sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.create_run(sample.run, sample.suite, sample.plans)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    writer = WriterProcess(store)
    assert not writer.alive
    anyio.run(writer.save_trials, sample.trials)
    writer.close()
    assert len(list(store.iter_trials(sample.run.id))) == len(sample.trials)


def test_only_stores_another_process_can_open_and_large_runs_use_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(MODE_ENV_VAR, raising=False)
    with Store("sqlite://") as memory, Store(sqlite_url(tmp_path / "s.db")) as file:
        assert memory.open_url is None
        assert not wanted(memory, 10**6)  # only this process sees an in-memory database
        assert wanted(file, writer_process.MIN_TRIALS)
        assert not wanted(file, writer_process.MIN_TRIALS - 1)
        monkeypatch.setenv(MODE_ENV_VAR, "thread")
        assert not wanted(file, 10**6)
        monkeypatch.setenv(MODE_ENV_VAR, "process")
        assert wanted(file, 1)
        assert not wanted(memory, 1)


def test_a_relative_sqlite_file_is_opened_where_the_run_s_process_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Store("sqlite:///rel/store.db") as store:
        assert store.open_url == f"sqlite:///{tmp_path / 'rel' / 'store.db'}"


def test_a_batch_the_writer_cannot_read_is_answered_so_the_run_saves_it(
    tmp_path: Path,
) -> None:
    url = sqlite_url(tmp_path / "s.db")
    Store(url).close()
    lines = [
        json.dumps({"url": url}),
        json.dumps({"trials": 1}),
        '{"not": "a trial"}',
    ]
    out = io.BytesIO()
    serve(io.BytesIO(("\n".join(lines) + "\n").encode()), out)
    ready, answer = (json.loads(line) for line in out.getvalue().splitlines())
    assert ready == {"ready": True}
    assert answer["store"] is False and "could not be read" in answer["error"]


def test_a_store_the_writer_cannot_open_is_told_not_raised(tmp_path: Path) -> None:
    out = io.BytesIO()
    serve(io.BytesIO(json.dumps({"url": "nosuchdb://x"}).encode() + b"\n"), out)
    answer = json.loads(out.getvalue())
    assert answer["ready"] is False and "nosuchdb" in answer["error"]
