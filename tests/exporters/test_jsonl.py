"""JSON Lines: a run line, one line per trial with its events, an end line; content opt-in."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from tests.exporters._samples import MARKER, RUN, SUITE, error_trial, tool_trial
from trialkit import Suite, Task, graders, run_sync
from trialkit.exporters import JsonlExporter
from trialkit.models import ScriptedModel
from trialkit.outcome import Outcome

FINISHED = RUN.model_copy(update={"status": "completed", "finished_at": RUN.started_at})


def export(path: Path, *, include_content: bool = False) -> list[dict[str, Any]]:
    exporter = JsonlExporter(path, include_content=include_content)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(tool_trial())
    exporter.on_trial(error_trial())
    exporter.on_run_end(FINISHED)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_run_line_a_line_per_trial_and_an_end_line(tmp_path: Path) -> None:
    run, first, second, end = export(tmp_path / "trace.jsonl")
    assert run == {
        "type": "run",
        "schema_version": 1,
        "run_id": "run-1",
        "name": "nightly",
        "started_at": "2026-03-01T12:00:00.250000+00:00",
        "config": {"harness": "agent"},
        "suite": {"id": "capitals", "kind": "regression", "description": None},
    }
    assert end == {
        "type": "run_end",
        "run_id": "run-1",
        "status": "completed",
        "finished_at": "2026-03-01T12:00:00.250000+00:00",
        "trials": 2,
    }
    assert {k: first[k] for k in ("type", "run_id", "suite_id", "task_id", "trial")} == {
        "type": "trial",
        "run_id": "run-1",
        "suite_id": "capitals",
        "task_id": "france",
        "trial": 0,
    }
    assert (first["verdict"], first["status"], first["duration_s"]) == ("pass", "completed", 2.1)
    assert first["usage"] == {
        "input_tokens": 270,
        "output_tokens": 15,
        "cache_read_tokens": 100,
        "cache_write_tokens": 0,
        "reasoning_tokens": 3,
    }
    assert first["grader_usage"]["cache_write_tokens"] == 30
    assert (first["cost_usd"], first["grader_cost_usd"]) == (0.0012, 0.0002)
    assert [(s["name"], s["verdict"], s["value"], s["rationale"]) for s in first["scores"]] == [
        ("contains", "pass", 1.0, "found 'paris'"),
        ("judge", "pass", None, "the judge agrees"),
        ("human", "unknown", None, None),
    ]
    assert second["error"] == {"type": "RuntimeError", "message": "agent crashed", "phase": "agent"}
    assert second["events"] == []


def test_events_tell_the_trial_in_order(tmp_path: Path) -> None:
    trial = export(tmp_path / "trace.jsonl")[1]
    assert [(e["type"], e.get("role", "")) for e in trial["events"]] == [
        ("turn", ""),
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "tool"),
        ("message", "assistant"),
        ("model_call", "agent"),
        ("tool_call", ""),  # right after the call that asked for it
        ("model_call", "agent"),
        ("model_call", "agent"),
        ("reasoning", ""),
        ("model_call", "grader"),
        ("score", ""),
        ("score", ""),
        ("score", ""),
    ]
    turn, *_, first, tool, second, failed, reasoning, judge = trial["events"][:12]
    assert turn == {
        "type": "turn",
        "turn": 0,
        "started_at": 0.1,
        "duration_s": 1.5,
        "is_error": False,
        "input_chars": 32,
        "output_chars": 17,
    }
    assert first == {
        "type": "model_call",
        "turn": 0,
        "role": "agent",
        "model": "openai/gpt-4o-mini",
        "response_model": "gpt-4o-mini-2024-07-18",
        "response_id": "chatcmpl-1",
        "finish_reason": "tool_calls",
        "usage": {
            "input_tokens": 120,
            "output_tokens": 10,
            "cache_read_tokens": 100,
            "cache_write_tokens": 0,
            "reasoning_tokens": 0,
        },
        "cost_usd": 0.0001,
        "latency_s": 0.5,
        "retries": 0,
        "replayed": False,
        "error": None,
        "request_messages": 2,
        "output_chars": 0,
        "tool_calls": [{"id": "call_1", "name": "search"}],
    }
    assert tool == {
        "type": "tool_call",
        "turn": 0,
        "id": "call_1",
        "name": "search",
        "status": "ok",
        "started_at": None,
        "duration_s": 0.25,
        "result_chars": 17,
    }
    assert (second["output_chars"], second["retries"]) == (17, 1)
    assert (failed["error"], failed["retries"]) == ("RateLimitError: slow down", 2)
    assert reasoning == {
        "type": "reasoning",
        "turn": 0,
        "redacted": False,
        "content_chars": 18,
    }
    assert judge["model"] == "anthropic/claude-haiku"


def test_content_is_left_out_unless_asked_for(tmp_path: Path) -> None:
    export(tmp_path / "plain.jsonl")
    plain = (tmp_path / "plain.jsonl").read_text(encoding="utf-8")
    assert MARKER not in plain
    lines = export(tmp_path / "full.jsonl", include_content=True)
    full = (tmp_path / "full.jsonl").read_text(encoding="utf-8")
    for marker in (
        "SYSTEM-TEXT",
        "QUESTION-TEXT",
        "ARGS-TEXT",
        "RESULT-TEXT",
        "ANSWER-TEXT",
        "REASONING-TEXT",
        "JUDGE-TEXT",
        "JUDGE-PROMPT-TEXT",
        "STATE-TEXT",
        "TRACEBACK-TEXT",
    ):
        assert marker in full, marker
    trial = lines[1]
    assert trial["output"] == "Paris ANSWER-TEXT"
    assert trial["state"] == {"city": "Paris STATE-TEXT"}
    message = trial["events"][3]
    assert message["tool_calls"] == [
        {"id": "call_1", "name": "search", "arguments": {"q": "france ARGS-TEXT"}}
    ]
    call = trial["events"][6]
    assert call["request"]["config"] == {"temperature": 0.2, "max_tokens": 100}
    assert call["response"]["id"] == "chatcmpl-1"


def test_each_trial_is_on_disk_as_soon_as_it_finished(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "trace.jsonl"
    exporter = JsonlExporter(path)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(tool_trial())
    assert len(path.read_bytes().splitlines()) == 2  # no end line: the run is still going
    exporter.on_run_end(FINISHED)
    assert json.loads(path.read_bytes().splitlines()[-1])["type"] == "run_end"


def test_append_keeps_earlier_runs(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    export(path)
    exporter = JsonlExporter(path, append=True)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_run_end(FINISHED)
    assert len(path.read_text().splitlines()) == 6
    export(path)
    assert len(path.read_text().splitlines()) == 4


def test_a_stream_is_written_and_left_open() -> None:
    stream = io.BytesIO()
    exporter = JsonlExporter(stream)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(error_trial())
    exporter.on_run_end(FINISHED)
    assert not stream.closed
    assert [json.loads(line)["type"] for line in stream.getvalue().splitlines()] == [
        "run",
        "trial",
        "run_end",
    ]


def test_broken_text_still_makes_valid_utf8(tmp_path: Path) -> None:
    trial = error_trial().model_copy(update={"outcome": Outcome(output="bad \udcff byte")})
    path = tmp_path / "trace.jsonl"
    exporter = JsonlExporter(path, include_content=True)
    exporter.on_run_start(RUN, SUITE)
    exporter.on_trial(trial)
    exporter.on_run_end(FINISHED)
    line = path.read_bytes().splitlines()[1].decode("utf-8")
    assert json.loads(line)["output"] == "bad ? byte"


def test_a_run_writes_its_trials(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    suite = Suite(
        id="capitals",
        model=ScriptedModel("agent", ["Paris"]),
        tasks=[Task(id="france", input="Capital?", graders=[graders.contains("Paris")])],
        trials=3,
    )
    report = run_sync(suite, exporters=[JsonlExporter(path)])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["run", "trial", "trial", "trial", "run_end"]
    assert lines[0]["run_id"] == report.run.id
    assert lines[-1]["status"] == "completed"
    trials = sorted(lines[1:4], key=lambda t: t["trial"])
    assert [t["trial"] for t in trials] == [0, 1, 2]
    assert [e["type"] for e in trials[0]["events"]] == [
        "turn",
        "message",
        "message",
        "model_call",
        "score",
    ]
    assert trials[0]["output_chars"] == 5
