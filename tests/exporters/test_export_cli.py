"""`trialkit export RUN`: a run written by the runner, exported from the store end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.exporters._samples import decode_spans
from tests.fakes.capture_server import CaptureServer
from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.export import export_command
from trialkit.models import ScriptedModel

KEY = "sk-test-SECRET-9f8e7d"


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A store holding one run named `nightly`: a task passing twice, one failing once."""
    url = str(tmp_path / "store.db")
    suite = Suite(
        id="capitals",
        model=ScriptedModel("agent", ["Paris"]),
        tasks=[
            Task(id="france", input="Capital of France?", graders=[graders.contains("Paris")]),
            Task(
                id="spain", input="Capital of Spain?", trials=1, graders=[graders.equals("Madrid")]
            ),
        ],
        trials=2,
    )
    run_sync(suite, store=url, name="nightly")
    return url


def export(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(export_command, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_jsonl_to_a_file(store: str, tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl"
    code, stdout, stderr = export("nightly", "--to", "jsonl", "-o", str(out), "--store", store)
    assert (code, stdout) == (0, "")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["run", "trial", "trial", "trial", "run_end"]
    assert [(t["task_id"], t["trial"], t["verdict"]) for t in lines[1:4]] == [
        ("france", 0, "pass"),
        ("france", 1, "pass"),
        ("spain", 0, "fail"),
    ]
    assert lines[0]["name"] == "nightly"
    assert "Capital" not in out.read_text()
    assert stderr == f"exported 3 trials of run {lines[0]['run_id']} to {out}\n"


def test_jsonl_with_content_to_standard_output(store: str) -> None:
    code, stdout, _ = export("nightly", "--to", "jsonl", "--include-content", "--store", store)
    assert code == 0
    trial = json.loads(stdout.splitlines()[1])
    assert trial["output"] == "Paris"
    assert trial["events"][1] == {
        "type": "message",
        "turn": 0,
        "role": "user",
        "content": "Capital of France?",
    }


def test_otel_with_a_header(store: str, capture_server: CaptureServer) -> None:
    code, _, stderr = export(
        "nightly",
        "--to",
        "otel",
        "--endpoint",
        capture_server.url,
        "--header",
        f"Authorization=Bearer {KEY}",
        "--store",
        store,
    )
    assert code == 0, stderr
    requests = capture_server.requests
    assert {r.path for r in requests} == {"/v1/traces"}
    assert {r.headers["authorization"] for r in requests} == {f"Bearer {KEY}"}
    spans = decode_spans(requests)
    roots = [s for s in spans if not s.parent_id]
    assert [
        (r.attributes["trialkit.task.id"], r.attributes["trialkit.trial.verdict"]) for r in roots
    ] == [
        ("france", "pass"),
        ("france", "pass"),
        ("spain", "fail"),
    ]
    assert sum(s.name == "chat agent" for s in spans) == 3
    assert stderr.startswith("exported 3 trials (6 spans) of run ")
    assert KEY not in stderr


def test_langfuse_from_the_environment(store: str, capture_server: CaptureServer) -> None:
    env = {
        "LANGFUSE_HOST": capture_server.url,
        "LANGFUSE_PUBLIC_KEY": "pk-lf-1",
        "LANGFUSE_SECRET_KEY": KEY,
    }
    code, _, stderr = export("nightly", "--to", "langfuse", "--store", store, env=env)
    assert code == 0, stderr
    traces = capture_server.requests_to("/api/public/otel/v1/traces")
    scores = capture_server.requests_to("/api/public/scores")
    assert len(decode_spans(traces)) == 6
    assert [(s.json["name"], s.json["value"]) for s in scores] == [
        ("trialkit.verdict", "pass"),
        ("contains('Paris')", 1.0),
        ("trialkit.verdict", "pass"),
        ("contains('Paris')", 1.0),
        ("trialkit.verdict", "fail"),
        ("equals('Madrid')", 0.0),
    ]
    assert "3 trials (6 spans, 6 scores)" in stderr


def test_secrets_stay_in_headers(store: str, capture_server: CaptureServer, tmp_path: Path) -> None:
    export(
        "nightly",
        "--to",
        "otel",
        "--endpoint",
        capture_server.url,
        "--header",
        f"x-key={KEY}",
        "--include-content",
        "--store",
        store,
    )
    env = {
        "LANGFUSE_HOST": capture_server.url,
        "LANGFUSE_PUBLIC_KEY": "pk",
        "LANGFUSE_SECRET_KEY": KEY,
    }
    export("nightly", "--to", "langfuse", "--include-content", "--store", store, env=env)
    out = tmp_path / "trace.jsonl"
    export("nightly", "--to", "jsonl", "--include-content", "-o", str(out), "--store", store)
    assert len(capture_server.requests) >= 8
    for request in capture_server.requests:
        assert KEY.encode() not in request.body
    assert KEY not in out.read_text()


def test_a_refused_export_exits_1(store: str, capture_server: CaptureServer) -> None:
    capture_server.fail("/v1/traces", 401)
    code, _, stderr = export(
        "nightly", "--to", "otel", "--endpoint", capture_server.url, "--store", store
    )
    assert code == 1
    first, second, summary = stderr.splitlines()
    assert first.startswith(f"error: exporting traces to {capture_server.url}/v1/traces failed: ")
    assert "401" in first
    assert second == f"error: 3 of 3 trials were not sent to {capture_server.url}/v1/traces"
    assert summary.startswith("exported 0 trials (0 spans)")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--to", "otel"], {}, "error: --to otel needs --endpoint URL"),
        (["--to", "langfuse"], {}, "error: exporting to Langfuse needs LANGFUSE_HOST"),
        (
            ["--to", "langfuse", "--endpoint", "http://127.0.0.1:1"],
            {"LANGFUSE_PUBLIC_KEY": "pk"},
            "error: exporting to Langfuse needs LANGFUSE_SECRET_KEY",
        ),
        (
            ["--to", "otel", "--endpoint", "localhost:4318"],
            {},
            "error: OTLP endpoint 'localhost:4318'",
        ),
        (
            ["--to", "otel", "--endpoint", "http://x", "--header", KEY],
            {},
            "error: --header: expected NAME=VALUE",
        ),
        (["--to", "otel", "-o", "x.jsonl"], {}, "error: -o/--output is for --to jsonl"),
        (["--to", "jsonl", "--header", "a=b"], {}, "error: --header is for --to otel"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    store: str, args: list[str], env: dict[str, str], message: str
) -> None:
    unset = {
        name: ""
        for name in (
            "LANGFUSE_HOST",
            "LANGFUSE_BASE_URL",
            "LANGFUSE_PUBLIC_KEY",
            "LANGFUSE_SECRET_KEY",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        )
    }
    code, stdout, stderr = export("nightly", *args, "--store", store, env={**unset, **env})
    assert code == 2
    assert stdout == ""
    assert stderr.startswith(message)
    assert len(stderr.splitlines()) == 1
    assert KEY not in stderr


def test_an_unknown_run_exits_2_and_writes_nothing(store: str, tmp_path: Path) -> None:
    out = tmp_path / "trace.jsonl"
    code, _, stderr = export("nope", "--to", "jsonl", "-o", str(out), "--store", store)
    assert code == 2
    assert stderr.startswith("error: no run matches 'nope'")
    assert not out.exists()


def test_an_unwritable_file_exits_2(store: str, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    code, _, stderr = export(
        "nightly", "--to", "jsonl", "-o", str(tmp_path / "file" / "x.jsonl"), "--store", store
    )
    assert code == 2
    assert stderr.startswith(f"error: {tmp_path / 'file' / 'x.jsonl'}: cannot write the export")


def test_piped_standard_output(store: str) -> None:
    script = "from trialkit.cli.export import export_command; export_command()"
    result = subprocess.run(
        [sys.executable, "-c", script, "nightly", "--to", "jsonl", "--store", store],
        capture_output=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "error"},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 5
