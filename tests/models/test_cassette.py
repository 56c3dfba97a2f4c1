"""Cassettes (DESIGN §7): per-trial recordings, strict replay, atomic concurrent writes, no
secrets on disk, and the maintenance functions behind `trialkit cache`."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trialkit.models.base import GenerationConfig, ModelRequest, ModelResponse, ToolSpec
from trialkit.models.cassette import (
    MANIFEST,
    CacheMode,
    Cassette,
    CassetteError,
    CassetteMiss,
)
from trialkit.models.cassette_tools import cassette_stats, prune_cassette, verify_cassette
from trialkit.transcript import Message, ToolCall, Usage

MODEL = "openai/gpt-4o-mini"
FAKE_KEY = "sk-test-0123456789abcdefghijklmnop"


def req(
    text: str = "What is the capital of France?",
    *,
    tools: list[ToolSpec] | None = None,
    config: GenerationConfig | None = None,
) -> ModelRequest:
    return ModelRequest(
        messages=[Message(role="user", content=text)],
        tools=tools or [],
        config=config or GenerationConfig(),
    )


def resp(text: str = "Paris") -> ModelResponse:
    return ModelResponse(
        message=Message(role="assistant", content=text),
        usage=Usage(input_tokens=3, output_tokens=1),
    )


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def recorded(root: Path, model: str = MODEL, request: ModelRequest | None = None) -> Path:
    key = (request or req()).key(model)
    return root / model.replace("/", "__") / key[:2] / f"{key}.json"


# -- record and replay -------------------------------------------------------------------------


def test_replay_returns_each_trials_and_occurrences_own_response(tmp_path: Path) -> None:
    rec = Cassette(tmp_path, CacheMode.RECORD)
    for trial in range(3):
        for occurrence in range(2):
            answer = resp(f"answer t{trial} o{occurrence}")
            rec.record(MODEL, req(), answer, trial=trial, occurrence=occurrence)

    replay = Cassette(tmp_path, "replay")
    for trial in range(3):
        for occurrence in range(2):
            got = replay.lookup(MODEL, req(), trial=trial, occurrence=occurrence)
            assert got is not None
            assert got.text == f"answer t{trial} o{occurrence}"
            assert got.usage == Usage(input_tokens=3, output_tokens=1)
    assert replay.lookup(MODEL, req(), trial=3, occurrence=0) is None
    assert replay.lookup(MODEL, req("other"), trial=0, occurrence=0) is None


def test_file_layout_is_one_pretty_file_per_key(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record(MODEL, req("Zürich?"), resp("Ja"), trial=1, occurrence=0)
    path = recorded(tmp_path, request=req("Zürich?"))
    assert files(tmp_path) == [path]
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert "Zürich" in text  # ensure_ascii=False: reviewable in git
    assert '\n  "key": ' in text  # indent 2
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["schema_version"] == 1
    assert data["key"] == path.stem
    assert data["model"] == MODEL
    assert data["kind"] == "model"
    assert data["request"] == req("Zürich?").canonical(MODEL)
    [entry] = data["responses"]
    assert (entry["trial"], entry["occurrence"]) == (1, 0)
    assert entry["response"]["message"]["content"] == "Ja"
    assert entry["recorded_at"].endswith("Z")


def test_responses_are_listed_in_numeric_trial_order(tmp_path: Path) -> None:
    cassette = Cassette(tmp_path, "record")
    for trial in (10, 2, 0, 1):
        cassette.record(MODEL, req(), resp(str(trial)), trial=trial, occurrence=0)
    data = json.loads(recorded(tmp_path).read_text())
    assert [e["trial"] for e in data["responses"]] == [0, 1, 2, 10]


def test_key_ignores_how_the_request_was_built(tmp_path: Path) -> None:
    cassette = Cassette(tmp_path, "record")
    plain = req(config=GenerationConfig(temperature=0.5, extra={"a": 1, "b": 2}))
    explicit = ModelRequest(
        messages=[Message(role="user", content="What is the capital of France?", name=None)],
        tools=[],
        tool_choice=None,
        config=GenerationConfig(temperature=0.5, max_tokens=None, extra={"b": 2, "a": 1}),
        response_format=None,
    )
    cassette.record(MODEL, plain, resp("one"), trial=0, occurrence=0)
    cassette.record(MODEL, explicit, resp("two"), trial=1, occurrence=0)
    assert len(files(tmp_path)) == 1

    cassette.record("openai/gpt-4o", plain, resp(), trial=0, occurrence=0)
    cassette.record(
        MODEL, req(config=GenerationConfig(temperature=0.7)), resp(), trial=0, occurrence=0
    )
    assert len(files(tmp_path)) == 3  # another model, another temperature: other keys


def test_text_recordings_for_plain_function_harnesses(tmp_path: Path) -> None:
    rec = Cassette(tmp_path, "record")
    rec.record_text("fn/agent", {"prompt": "hi", "turn": 0}, "hello 0", trial=0, occurrence=0)
    rec.record_text("fn/agent", {"turn": 0, "prompt": "hi"}, "hello 1", trial=1, occurrence=0)
    assert len(files(tmp_path)) == 1
    replay = Cassette(tmp_path, "replay")
    assert replay.lookup_text("fn/agent", {"prompt": "hi", "turn": 0}, trial=1, occurrence=0) == (
        "hello 1"
    )
    assert replay.lookup_text("fn/agent", {"prompt": "yo"}, trial=0, occurrence=0) is None
    miss = replay.miss_text("fn/agent", {"prompt": "yo"}, task_id="t", trial=0, occurrence=0)
    assert '-    "prompt": "hi",' in str(miss)
    assert '+    "prompt": "yo"' in str(miss)
    assert verify_cassette(tmp_path) == []


def test_lookups_are_served_from_memory_after_the_first_read(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record(MODEL, req(), resp(), trial=0, occurrence=0)
    replay = Cassette(tmp_path, "replay")
    assert replay.lookup(MODEL, req(), trial=0, occurrence=0) is not None
    recorded(tmp_path).unlink()
    for _ in range(100):
        got = replay.lookup(MODEL, req(), trial=0, occurrence=0)
        assert got is not None
        assert got.text == "Paris"
    first = replay.lookup(MODEL, req(), trial=0, occurrence=0)
    assert first is not None
    first.message.content = "changed by a caller"
    again = replay.lookup(MODEL, req(), trial=0, occurrence=0)
    assert again is not None
    assert again.text == "Paris"


# -- replay misses -----------------------------------------------------------------------------


def test_replay_miss_names_the_call_and_shows_the_diff(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record(MODEL, req(), resp(), trial=0, occurrence=0)
    Cassette(tmp_path, "record").record(MODEL, req("Tell me a joke"), resp(), trial=0, occurrence=0)
    replay = Cassette(tmp_path, "replay")
    changed = req("What is the capital of Spain?")
    assert replay.lookup(MODEL, changed, trial=2, occurrence=1) is None

    miss = replay.miss(MODEL, changed, task_id="capitals/spain", trial=2, occurrence=1)
    assert isinstance(miss, CassetteMiss)
    text = str(miss)
    assert "task 'capitals/spain'" in text
    assert "trial 2" in text
    assert MODEL in text
    assert "occurrence 1" in text
    assert changed.key(MODEL) in text
    assert '-      "content": "What is the capital of France?",' in text
    assert '+      "content": "What is the capital of Spain?",' in text
    assert "Tell me a joke" not in text  # the closest recording, not any
    assert (miss.task_id, miss.trial, miss.model, miss.key) == (
        "capitals/spain",
        2,
        MODEL,
        changed.key(MODEL),
    )


def test_replay_miss_survives_pickling(tmp_path: Path) -> None:
    miss = Cassette(tmp_path, "replay").miss(MODEL, req(), task_id="t", trial=3, occurrence=0)
    copy = pickle.loads(pickle.dumps(miss))
    assert (str(copy), copy.task_id, copy.trial, copy.key) == (str(miss), "t", 3, miss.key)


def test_replay_miss_diff_is_capped(tmp_path: Path) -> None:
    many = [Message(role="user", content=f"line {i}") for i in range(100)]
    Cassette(tmp_path, "record").record(
        MODEL, ModelRequest(messages=many), resp(), trial=0, occurrence=0
    )
    other = ModelRequest(messages=[Message(role="user", content=f"LINE {i}") for i in range(100)])
    text = str(Cassette(tmp_path, "replay").miss(MODEL, other, task_id="t", trial=0, occurrence=0))
    assert len(text.splitlines()) < 50
    assert "more lines" in text


def test_replay_miss_without_recordings_of_the_model(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record("anthropic/claude", req(), resp(), trial=0, occurrence=0)
    text = str(Cassette(tmp_path, "replay").miss(MODEL, req(), task_id="t", trial=0, occurrence=0))
    assert f"no recordings of {MODEL} in {tmp_path}" in text
    assert "anthropic/claude" in text
    empty = Cassette(tmp_path / "empty", "replay").miss(
        MODEL, req(), task_id="t", trial=0, occurrence=0
    )
    assert f"no recordings of {MODEL}" in str(empty)


def test_replay_miss_for_a_trial_that_was_not_recorded(tmp_path: Path) -> None:
    rec = Cassette(tmp_path, "record")
    for trial in range(3):
        rec.record(MODEL, req(), resp(), trial=trial, occurrence=0)
    replay = Cassette(tmp_path, "replay")
    assert replay.lookup(MODEL, req(), trial=4, occurrence=0) is None
    text = str(replay.miss(MODEL, req(), task_id="t", trial=4, occurrence=0))
    assert "records this request, but not for trial 4 occurrence 0" in text
    assert "trial 2 occurrence 0" in text


# -- modes -------------------------------------------------------------------------------------


def test_auto_replays_what_exists_and_fills_only_what_is_missing(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record(MODEL, req(), resp("old"), trial=0, occurrence=0)
    auto = Cassette(tmp_path, CacheMode.AUTO)
    hit = auto.lookup(MODEL, req(), trial=0, occurrence=0)
    assert hit is not None
    assert hit.text == "old"
    assert auto.lookup(MODEL, req(), trial=1, occurrence=0) is None
    auto.record(MODEL, req(), resp("new"), trial=0, occurrence=0)  # present: kept
    auto.record(MODEL, req(), resp("new"), trial=1, occurrence=0)  # missing: filled
    again = auto.lookup(MODEL, req(), trial=1, occurrence=0)
    assert again is not None
    assert again.text == "new"
    replay = Cassette(tmp_path, "replay")
    texts = [replay.lookup(MODEL, req(), trial=t, occurrence=0) for t in (0, 1)]
    assert [t.text if t else None for t in texts] == ["old", "new"]


def test_record_overwrites_and_leaves_unchanged_responses_alone(tmp_path: Path) -> None:
    rec = Cassette(tmp_path, "record")
    rec.record(MODEL, req(), resp("old"), trial=0, occurrence=0)
    path = recorded(tmp_path)
    data = json.loads(path.read_text())
    data["responses"][0]["recorded_at"] = "2020-01-01T00:00:00Z"
    path.write_text(json.dumps(data))

    Cassette(tmp_path, "record").record(MODEL, req(), resp("old"), trial=0, occurrence=0)
    assert "2020-01-01" in path.read_text()  # same answer: no churn in git

    Cassette(tmp_path, "record").record(MODEL, req(), resp("new"), trial=0, occurrence=0)
    got = Cassette(tmp_path, "replay").lookup(MODEL, req(), trial=0, occurrence=0)
    assert got is not None
    assert got.text == "new"
    assert "2020-01-01" not in path.read_text()


def test_live_touches_nothing(tmp_path: Path) -> None:
    root = tmp_path / "cassette"
    live = Cassette(root, "live")
    live.record(MODEL, req(), resp(), trial=0, occurrence=0)
    live.record_text(MODEL, "x", "y", trial=0, occurrence=0)
    live.write_manifest()
    assert not root.exists()
    Cassette(root, "record").record(MODEL, req(), resp(), trial=0, occurrence=0)
    assert Cassette(root, "live").lookup(MODEL, req(), trial=0, occurrence=0) is None


def test_replay_never_writes(tmp_path: Path) -> None:
    replay = Cassette(tmp_path / "c", "replay")
    replay.record(MODEL, req(), resp(), trial=0, occurrence=0)
    assert not (tmp_path / "c").exists()
    assert Cassette(tmp_path, "record").lookup(MODEL, req(), trial=0, occurrence=0) is None


# -- files: atomic, concurrent, safe -----------------------------------------------------------


def test_no_temp_files_are_left_behind(tmp_path: Path) -> None:
    cassette = Cassette(tmp_path, "record")
    for trial in range(5):
        cassette.record(MODEL, req(), resp(str(trial)), trial=trial, occurrence=0)
    cassette.write_manifest()
    assert [p.name for p in files(tmp_path)] == [MANIFEST, recorded(tmp_path).name]


def test_concurrent_threads_recording_one_key_keep_every_response(tmp_path: Path) -> None:
    cassette = Cassette(tmp_path, "record")
    errors: list[BaseException] = []

    def worker(thread: int) -> None:
        try:
            for i in range(50):
                trial = thread * 50 + i
                cassette.record(MODEL, req(), resp(f"t{trial}"), trial=trial, occurrence=0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    data = json.loads(recorded(tmp_path).read_text())
    assert len(data["responses"]) == 400
    replay = Cassette(tmp_path, "replay")
    for trial in range(400):
        got = replay.lookup(MODEL, req(), trial=trial, occurrence=0)
        assert got is not None
        assert got.text == f"t{trial}"
    assert [p.name for p in files(tmp_path)] == [recorded(tmp_path).name]


def test_trials_that_finish_during_a_write_share_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: while one write of a key's file is under way, the other trials' answers
    for that key wait and go to disk together, and every `record` returns only once its own
    answer is on disk."""
    from trialkit.models import cassette as module

    cassette = Cassette(tmp_path, "record")
    real_write, writes, first = module.write_file, [], threading.Event()
    release = threading.Event()

    def slow_write(path: Path, data: object) -> None:
        writes.append(len(data["responses"]))  # type: ignore[index]
        first.set()
        release.wait(timeout=30)
        real_write(path, data)

    monkeypatch.setattr(module, "write_file", slow_write)
    returned: list[int] = []

    def one(trial: int) -> None:
        cassette.record(MODEL, req(), resp(f"t{trial}"), trial=trial, occurrence=0)
        data = json.loads(recorded(tmp_path).read_text())
        assert f"t{trial}" in {e["response"]["message"]["content"] for e in data["responses"]}
        returned.append(trial)

    threads = [threading.Thread(target=one, args=(0,))]
    threads[0].start()
    assert first.wait(timeout=30)  # trial 0's write has begun and is held
    threads += [threading.Thread(target=one, args=(n,)) for n in range(1, 20)]
    for t in threads[1:]:
        t.start()
    deadline = time.monotonic() + 30
    while len(cassette._pending.get(recorded(tmp_path).stem, [])) < 19:
        assert time.monotonic() < deadline, "the other trials never queued"
        time.sleep(0.01)
    assert returned == []  # nobody returns before its answer is written
    release.set()
    for t in threads:
        t.join(timeout=30)
    assert sorted(returned) == list(range(20))
    assert writes == [1, 20]  # trial 0 alone, then the 19 others in one write


def test_a_failed_shared_write_fails_every_trial_it_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trialkit.models import cassette as module

    cassette = Cassette(tmp_path, "record")
    cassette.record(MODEL, req(), resp("t0"), trial=0, occurrence=0)
    gate = threading.Event()

    def full_disk(path: Path, data: object) -> None:
        gate.wait(timeout=30)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "write_file", full_disk)
    errors: dict[int, BaseException] = {}

    def one(trial: int) -> None:
        try:
            cassette.record(MODEL, req(), resp(f"t{trial}"), trial=trial, occurrence=0)
        except BaseException as exc:
            errors[trial] = exc

    threads = [threading.Thread(target=one, args=(n,)) for n in range(1, 6)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # let them queue behind the first writer
    gate.set()
    for t in threads:
        t.join(timeout=30)
    assert sorted(errors) == [1, 2, 3, 4, 5]  # none is told its answer was kept
    for exc in errors.values():
        assert "No space left on device" in str(exc)
    data = json.loads(recorded(tmp_path).read_text())
    assert [e["trial"] for e in data["responses"]] == [0]  # what was on disk is intact


def test_a_file_another_cassette_replaced_is_read_again(tmp_path: Path) -> None:
    """Two cassettes (as two processes would) take turns on one key: neither loses the
    other's trials, though each keeps its last write in memory."""
    a, b = Cassette(tmp_path, "record"), Cassette(tmp_path, "record")
    for trial in range(6):
        (a if trial % 2 == 0 else b).record(
            MODEL, req(), resp(f"t{trial}"), trial=trial, occurrence=0
        )
    data = json.loads(recorded(tmp_path).read_text())
    assert [e["trial"] for e in data["responses"]] == list(range(6))


RECORDER = """
import sys
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import Cassette
from trialkit.transcript import Message

root, first = sys.argv[1], int(sys.argv[2])
request = ModelRequest(messages=[Message(role="user", content="What is the capital of France?")])
cassette = Cassette(root, "record")
for trial in range(first, first + 40):
    answer = ModelResponse(message=Message(role="assistant", content=f"p{trial}"))
    cassette.record("openai/gpt-4o-mini", request, answer, trial=trial, occurrence=0)
"""


def test_two_processes_recording_different_trials_of_one_key_both_survive(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", RECORDER, str(tmp_path), str(first)])
        for first in (0, 40)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    data = json.loads(recorded(tmp_path).read_text())
    assert sorted(e["trial"] for e in data["responses"]) == list(range(80))
    assert verify_cassette(tmp_path) == []


@pytest.mark.parametrize(
    ("request_", "response"),
    [
        (req(config=GenerationConfig(extra={"api_key": "abc123"})), resp()),
        (req(config=GenerationConfig(extra={"headers": {"Authorization": "Basic x"}})), resp()),
        (req(config=GenerationConfig(extra={"X-Api-Key": "abc"})), resp()),
        (req(f"my key is {FAKE_KEY}"), resp()),
        (req(), resp(f"the key: {FAKE_KEY}")),
        (req(), resp("use Bearer abcdefghijklmnopqrstuvwxyz0123")),
    ],
)
def test_secrets_are_refused(
    tmp_path: Path, request_: ModelRequest, response: ModelResponse
) -> None:
    with pytest.raises(CassetteError, match="looks like a secret"):
        Cassette(tmp_path, "record").record(MODEL, request_, response, trial=0, occurrence=0)
    assert files(tmp_path) == []


def test_harmless_lookalikes_are_not_secrets(tmp_path: Path) -> None:
    tool = ToolSpec(
        name="login",
        parameters={"type": "object", "properties": {"api_key": {"type": "string"}}},
    )
    cassette = Cassette(tmp_path, "record")
    cassette.record(
        MODEL,
        req("pip install scikit-learn, ask about task-sk-1", tools=[tool]),
        resp(),
        trial=0,
        occurrence=0,
    )
    assert len(files(tmp_path)) == 1


def test_no_written_file_holds_the_api_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    cassette = Cassette(tmp_path, "auto")
    cassette.record(MODEL, req(), resp(), trial=0, occurrence=0)
    cassette.record_text("fn/agent", "hi", "hello", trial=0, occurrence=0)
    call = ToolCall(id="c1", name="fetch", arguments={"url": "https://x", "token": "ok"})
    tool_reply = ModelResponse(message=Message(role="assistant", tool_calls=[call]))
    cassette.record(MODEL, req("fetch it"), tool_reply, trial=0, occurrence=0)
    leaks = [
        (req(config=GenerationConfig(extra={"api_key": FAKE_KEY})), resp()),
        (
            req(
                config=GenerationConfig(extra={"headers": {"authorization": f"Bearer {FAKE_KEY}"}})
            ),
            resp(),
        ),
        (
            req(),
            ModelResponse(
                message=Message(
                    role="assistant",
                    tool_calls=[ToolCall(id="c", name="t", arguments={"k": FAKE_KEY})],
                )
            ),
        ),
    ]
    for request, response in leaks:
        with pytest.raises(CassetteError):
            cassette.record(MODEL, request, response, trial=1, occurrence=0)
    with pytest.raises(CassetteError):
        cassette.record_text("fn/agent", {"key": FAKE_KEY}, "x", trial=0, occurrence=0)
    cassette.write_manifest()
    written = files(tmp_path)
    assert len(written) == 4
    for path in written:
        assert FAKE_KEY not in path.read_text(encoding="utf-8"), path
        assert FAKE_KEY[3:] not in path.read_text(encoding="utf-8"), path


# -- bad files ---------------------------------------------------------------------------------


def test_corrupt_or_foreign_files_are_errors_naming_the_file(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record(MODEL, req(), resp(), trial=0, occurrence=0)
    path = recorded(tmp_path)
    path.write_text("<<<<<<< HEAD\n{")
    with pytest.raises(CassetteError, match="not readable JSON") as caught:
        Cassette(tmp_path, "replay").lookup(MODEL, req(), trial=0, occurrence=0)
    assert str(path) in str(caught.value)
    with pytest.raises(CassetteError):  # never silently overwritten
        Cassette(tmp_path, "record").record(MODEL, req(), resp(), trial=1, occurrence=0)

    path.write_text(json.dumps({"schema_version": 2, "whatever": []}))
    with pytest.raises(CassetteError, match="schema_version 2"):
        Cassette(tmp_path, "auto").lookup(MODEL, req(), trial=0, occurrence=0)


# -- maintenance: stats, verify, prune ---------------------------------------------------------


def test_stats_counts_files_recordings_and_models(tmp_path: Path) -> None:
    cassette = Cassette(tmp_path, "record")
    for trial in range(3):
        cassette.record(MODEL, req(), resp(), trial=trial, occurrence=0)
    cassette.record(MODEL, req("b"), resp(), trial=0, occurrence=0)
    cassette.record("anthropic/claude", req(), resp(), trial=0, occurrence=0)
    cassette.record("anthropic/claude", req(), resp(), trial=0, occurrence=1)
    stats = cassette_stats(tmp_path)
    assert (stats.files, stats.recordings, stats.invalid_files) == (3, 6, 0)
    assert stats.total_bytes == sum(p.stat().st_size for p in files(tmp_path))
    assert {m: (s.files, s.recordings) for m, s in stats.models.items()} == {
        MODEL: (2, 4),
        "anthropic/claude": (1, 2),
    }
    assert stats.oldest is not None
    assert stats.newest is not None
    assert stats.oldest <= stats.newest
    with pytest.raises(CassetteError, match="no such cassette folder"):
        cassette_stats(tmp_path / "missing")


def test_verify_finds_edited_corrupt_and_invalid_recordings(tmp_path: Path) -> None:
    cassette = Cassette(tmp_path, "record")
    for text in ("a", "b", "c", "d"):
        cassette.record(MODEL, req(text), resp(), trial=0, occurrence=0)
    assert verify_cassette(tmp_path) == []

    edited = recorded(tmp_path, request=req("a"))
    data = json.loads(edited.read_text())
    data["request"]["messages"][0]["content"] = "a, edited by hand"
    edited.write_text(json.dumps(data, indent=2))

    corrupt = recorded(tmp_path, request=req("b"))
    corrupt.write_text('{"schema_version": 1, "key": ')

    invalid = recorded(tmp_path, request=req("c"))
    data = json.loads(invalid.read_text())
    data["responses"][0]["response"]["message"]["role"] = "robot"
    invalid.write_text(json.dumps(data))

    problems = verify_cassette(tmp_path)
    assert len(problems) == 3
    by_file = {p.split(": ", 1)[0]: p for p in problems}
    assert "hashes to" in by_file[str(edited)]
    assert "not readable JSON" in by_file[str(corrupt)]
    assert "trial 0 occurrence 0" in by_file[str(invalid)]


def test_prune_needs_a_manifest(tmp_path: Path) -> None:
    Cassette(tmp_path, "record").record(MODEL, req(), resp(), trial=0, occurrence=0)
    with pytest.raises(CassetteError, match="run once with the cassette first"):
        prune_cassette(tmp_path, dry_run=True)
    assert len(files(tmp_path)) == 1


def test_prune_removes_what_the_last_run_did_not_use(tmp_path: Path) -> None:
    rec = Cassette(tmp_path, "record")
    rec.record(MODEL, req("kept"), resp(), trial=0, occurrence=0)
    rec.record(MODEL, req("stale"), resp(), trial=0, occurrence=0)
    rec.record("anthropic/claude", req("stale"), resp(), trial=0, occurrence=0)
    rec.write_manifest()
    assert rec.used_keys() == {
        req("kept").key(MODEL),
        req("stale").key(MODEL),
        req("stale").key("anthropic/claude"),
    }

    replay = Cassette(tmp_path, "replay")
    assert replay.lookup(MODEL, req("kept"), trial=0, occurrence=0) is not None
    assert replay.used_keys() == {req("kept").key(MODEL)}
    replay.write_manifest()
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["keys"] == [req("kept").key(MODEL)]

    stale = {
        recorded(tmp_path, request=req("stale")),
        recorded(tmp_path, "anthropic/claude", req("stale")),
    }
    assert set(prune_cassette(tmp_path, dry_run=True)) == stale
    assert len(files(tmp_path)) == 4
    assert set(prune_cassette(tmp_path, dry_run=False)) == stale
    assert files(tmp_path) == sorted([tmp_path / MANIFEST, recorded(tmp_path, request=req("kept"))])
    assert not (tmp_path / "anthropic__claude").exists()
    assert os.listdir(tmp_path / MODEL.replace("/", "__")) == [req("kept").key(MODEL)[:2]]
