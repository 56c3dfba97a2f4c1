"""What the databases cannot take as it is: NUL in text (PostgreSQL), and large JSON (packed)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, update

from trialkit._record import ErrorInfo
from trialkit.report import RunInfo, SuiteInfo, TaskPlan, TrialResult, build_report
from trialkit.score import Score, Verdict
from trialkit.store import Store, StoreError
from trialkit.store.encoding import (
    ESCAPE,
    PACK_MIN_CHARS,
    ZLIB,
    escape_nul,
    pack_json,
    pack_json_parts,
    unescape_nul,
    unpack_json,
)
from trialkit.store.schema import runs, trials
from trialkit.task import SuiteKind
from trialkit.transcript import Message, Transcript

from ._samples import T0, make_sample, make_trial

NASTY = ["", "plain", "\x00", "a\x00b", ESCAPE, ESCAPE + "0", "\x00" + ESCAPE, ESCAPE * 3 + "\x00"]


@given(st.text(alphabet=st.sampled_from(["a", "0", "\x00", ESCAPE, "é"])) | st.text())
def test_escaping_round_trips_and_leaves_plain_text_alone(text: str) -> None:
    escaped = escape_nul(text)

    assert "\x00" not in escaped
    assert unescape_nul(escaped) == text
    if "\x00" not in text and not text.startswith(ESCAPE):
        assert escaped == text


@given(st.text(alphabet=st.sampled_from(["a", "\x00", ESCAPE])), st.integers(0, 40))
def test_the_start_of_an_escaped_string_reads_as_the_start_of_the_text(text: str, cut: int) -> None:
    escaped = escape_nul(text)

    start = unescape_nul(escaped[: cut + 1])

    assert text.startswith(start)
    assert len(start) >= min(len(text), cut // 2)


def test_a_store_keeps_nul_and_the_escape_character_in_every_free_text(store: Store) -> None:
    weird = "ok\x00then" + ESCAPE + "0 and \x00"
    run = RunInfo(id="run\x00nul", name=weird, started_at=T0, status="running")
    suite = SuiteInfo(id="suite\x00", kind=SuiteKind.CAPABILITY, description=weird)
    plans = [TaskPlan(id=task_id, kind=SuiteKind.CAPABILITY) for task_id in NASTY]
    trial_list = [
        make_trial(
            run.id,
            task_id,
            0,
            verdict=Verdict.FAIL,
            output=weird * 3,
            scores=[Score.from_bool(False, name=f"check{weird}", rationale=weird)],
            error=ErrorInfo(type="ValueError", message=weird, traceback=weird),
        ).model_copy(
            update={
                "model": weird,
                "transcript": Transcript(messages=[Message(role="user", content=weird)]),
            }
        )
        for task_id in NASTY
    ]
    store.create_run(run, suite, plans)
    store.save_trials(trial_list)

    for trial in trial_list:
        assert store.load_trial(run.id, trial.task_id, 0) == trial
    streamed = store.iter_trials(run.id)
    assert sorted(streamed, key=lambda t: t.task_id) == sorted(trial_list, key=lambda t: t.task_id)
    [listed] = store.list_runs()
    assert (listed.id, listed.name, listed.suite_id) == (run.id, weird, suite.id)
    assert store.resolve_run(weird) == run.id
    results = {t.task_id: [TrialResult.from_trial(t)] for t in trial_list}
    for max_results in (0, 20):
        report = store.load_report(run.id, max_results=max_results)
        assert report == build_report(run, suite, plans, results, max_results=max_results)
    with store._engine.connect() as conn:
        raw = conn.exec_driver_sql("SELECT name, length(output) FROM runs, trials").first()
    assert raw is not None
    assert raw[0] == escape_nul(weird) != weird
    assert raw[1] == len(escape_nul(weird * 3))  # SQLite's `length` would stop at a NUL


@pytest.mark.parametrize("at", [0, 3990, 3999, 4000, 4001])
def test_the_output_preview_is_cut_where_it_is_in_memory(store: Store, at: int) -> None:
    sample = make_sample("preview")
    output = "x" * at + "\x00" + ESCAPE * 5 + "y" * 5000
    trial = make_trial("preview", "france", 0, verdict=Verdict.FAIL, output=output)
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials([trial])

    report = store.load_report("preview")

    assert report.task("france").results[0] == TrialResult.from_trial(trial)


def test_a_large_transcript_is_packed_and_a_small_one_is_not(store: Store) -> None:
    sample = make_sample("packed")
    big = make_trial("packed", "france", 0).model_copy(
        update={"transcript": Transcript(messages=[Message(role="user", content="Paris? " * 500)])}
    )
    small = make_trial("packed", "france", 1)
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials([big, small])

    with store._engine.connect() as conn:
        stored = {
            row.idx: row
            for row in conn.execute(
                select(trials.c.idx, trials.c.transcript, trials.c.transcript_packed)
            )
        }
    assert stored[0].transcript == ""
    assert bytes(stored[0].transcript_packed)[:1] == ZLIB
    assert len(stored[0].transcript_packed) < len(big.transcript.model_dump_json()) / 10
    assert stored[1].transcript == small.transcript.model_dump_json()
    assert stored[1].transcript_packed is None
    assert store.load_trial("packed", "france", 0) == big
    assert store.load_trial("packed", "france", 1) == small


def test_packing_keeps_small_json_as_text_and_round_trips_large_json() -> None:
    small = "{}" * (PACK_MIN_CHARS // 2 - 1)
    large = '{"a": "' + "é\x00" * PACK_MIN_CHARS + '"}'

    assert pack_json(small) == (small, None)
    text, packed = pack_json(large)
    assert text == ""
    assert packed is not None
    assert unpack_json(text, packed) == large
    assert unpack_json(text, memoryview(packed)) == large


@given(st.lists(st.text(alphabet=st.sampled_from(["{", "a", "é", "\x00", "}"]), max_size=700)))
def test_packing_in_parts_is_packing_the_whole(parts: list[str]) -> None:
    whole = "".join(parts)
    text, packed = pack_json_parts(parts)
    assert text == pack_json(whole)[0]
    assert (packed is None) == (len(whole) < PACK_MIN_CHARS)
    assert unpack_json(text, packed) == whole


def test_an_unknown_packing_is_refused_with_a_message(store: Store) -> None:
    sample = make_sample("future")
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials(sample.trials[:1])
    with store._engine.begin() as conn:
        conn.execute(update(trials).values(transcript_packed=b"Q0000"))

    with pytest.raises(StoreError, match="unknown packed encoding b'Q'"):
        store.load_trial(sample.run.id, sample.trials[0].task_id, 0)


def test_datetimes_and_floats_round_trip_exactly(store: Store) -> None:
    sample = make_sample("exact", started_at=T0 + timedelta(microseconds=7))
    odd = make_trial("exact", "france", 0, cost_usd=0.1 + 0.2).model_copy(
        update={"duration_s": 1 / 3, "grader_cost_usd": 5e-324}
    )
    store.create_run(sample.run, sample.suite, sample.plans)
    store.save_trials([odd])

    loaded = store.load_trial("exact", "france", 0)
    assert (loaded.cost_usd, loaded.duration_s, loaded.grader_cost_usd) == (
        0.1 + 0.2,
        1 / 3,
        5e-324,
    )
    with store._engine.connect() as conn:
        started = conn.scalar(select(runs.c.started_at))
    assert started == "2025-03-01T12:00:00.123463+00:00"
    assert store.load_report("exact").run.started_at == sample.run.started_at
