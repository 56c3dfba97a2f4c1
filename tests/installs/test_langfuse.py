"""`pip install 'trialkit[langfuse]'` alone: `trialkit export RUN --to langfuse` sends the
run's traces to Langfuse's OTLP endpoint and its scores to the scores API (a fake Langfuse
on loopback)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.capture_server import CaptureServer
from tests.installs.helpers import said, trialkit, write_capitals

INSTALL = "langfuse"


def test_a_run_is_exported_to_langfuse(tmp_path: Path) -> None:
    write_capitals(tmp_path)
    done = trialkit("run", "capitals.py", "--json", "report.json", cwd=tmp_path)
    assert done.returncode == 0, said(done)
    run_id = json.loads((tmp_path / "report.json").read_text())["run"]["id"]

    with CaptureServer() as langfuse:
        env = {
            "LANGFUSE_HOST": langfuse.url,
            "LANGFUSE_PUBLIC_KEY": "pk-lf-test",
            "LANGFUSE_SECRET_KEY": "sk-lf-test",
        }
        done = trialkit("export", run_id, "--to", "langfuse", cwd=tmp_path, env=env)
        traces = langfuse.requests_to("/api/public/otel/v1/traces")
        scores = langfuse.requests_to("/api/public/scores")
    assert done.returncode == 0, said(done)
    assert traces and all(r.headers["authorization"].startswith("Basic ") for r in traces)
    assert b"france" in b"".join(r.body for r in traces)
    assert {s.json["name"] for s in scores} >= {"contains('paris')", "contains('madrid')"}
