"""`pip install 'trialkit[otel]'` alone: `trialkit export RUN --to otel` sends the run's spans
over OTLP/HTTP (protobuf) to a receiver on loopback."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.capture_server import CaptureServer
from tests.installs.helpers import said, trialkit, write_capitals

INSTALL = "otel"


def test_a_run_is_exported_to_an_otlp_receiver(tmp_path: Path) -> None:
    write_capitals(tmp_path)
    done = trialkit("run", "capitals.py", "--json", "report.json", cwd=tmp_path)
    assert done.returncode == 0, said(done)
    run_id = json.loads((tmp_path / "report.json").read_text())["run"]["id"]

    with CaptureServer() as receiver:
        done = trialkit(
            "export", run_id, "--to", "otel", "--endpoint", receiver.url,
            "--header", "x-tenant=install-test", cwd=tmp_path,
        )  # fmt: skip
        sent = receiver.requests_to("/v1/traces")
    assert done.returncode == 0, said(done)
    assert sent, "nothing reached the receiver"
    assert all(r.headers["content-type"] == "application/x-protobuf" for r in sent)
    assert all(r.headers["x-tenant"] == "install-test" for r in sent)
    body = b"".join(r.body for r in sent)
    for text in (run_id.encode(), b"france", b"spain", b"gen_ai.evaluation.result"):
        assert text in body, text
