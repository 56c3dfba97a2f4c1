"""When the llama.cpp server dies, the trials say how (its signal or exit code), what it printed
last and what to try; and a server that failed is started once per run, not once per trial.

The server here is a small real process standing in for llama.cpp's: it answers the readiness
probe, then crashes on the first chat request the way a CPU-unfit build does (SIGSEGV).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trialkit import Suite, Task, run_sync
from trialkit.models import local
from trialkit.models.local import PORTABLE_BUILD, LocalModel, LocalServer
from trialkit.models.retry import RetryPolicy

FAKE_SERVER = """\
import http.server, os, signal, sys

port, mode = int(sys.argv[1]), sys.argv[2]
print("fake llama.cpp: loading the model", flush=True)
if mode == "exit":
    print("error: cannot load the model", flush=True)
    sys.exit(3)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"object": "list", "data": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        print("ggml_compute_forward_mul_mat: tile kernel", flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> type[LocalModel]:
    script = tmp_path / "fake_llama_server.py"
    script.write_text(FAKE_SERVER, encoding="utf-8")
    spawned: list[int] = []

    class FakeServer(LocalServer):
        def command(self) -> list[str]:
            spawned.append(1)
            return [sys.executable, str(script), str(self.port), mode]

    class FakeLocal(LocalModel):
        server_type = FakeServer
        starts = spawned

    # The stand-in needs no llama.cpp package; the weights are a real (tiny) file.
    monkeypatch.setattr(local, "_require_server_package", lambda: None)
    return FakeLocal


def run(model: LocalModel) -> list[str]:
    suite = Suite(id="s", model=model, trials=3, tasks=[Task(id="t", input="hi")])
    report = run_sync(suite, retry=RetryPolicy(attempts=2, base_delay=0.01), concurrency=3)
    results = report.tasks[0].results
    assert [r.verdict for r in results] == ["error"] * 3
    return [r.error.message for r in results if r.error is not None]


def test_a_crash_names_the_signal_the_log_and_the_portable_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF")
    model = fake_model(tmp_path, monkeypatch, "crash")(str(weights))

    messages = run(model)

    assert len(set(messages)) == 1
    message = messages[0]
    assert "the llama.cpp server stopped during the run: killed by SIGSEGV" in message
    assert "ggml_compute_forward_mul_mat: tile kernel" in message
    assert f'CMAKE_ARGS="{PORTABLE_BUILD}" pip install' in message
    assert message.count(f"{model.id}:") == 1  # named once, not "local/x: local/x: ..."
    assert model.starts == [1]  # type: ignore[attr-defined]


def test_a_server_that_cannot_start_is_started_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF")
    model = fake_model(tmp_path, monkeypatch, "exit")(str(weights))

    messages = run(model)

    assert len(messages) == 3
    assert len(set(messages)) == 1
    assert messages[0].endswith(
        ": the llama.cpp server for tiny.gguf did not start: exit code 3; its last output: "
        "fake llama.cpp: loading the model / error: cannot load the model"
    )
    assert model.starts == [1]  # type: ignore[attr-defined]
    assert PORTABLE_BUILD not in messages[0]  # an exit code is no crash: no rebuild advice


def test_the_readme_installs_the_portable_build() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f'CMAKE_ARGS="{PORTABLE_BUILD}" pip install -e ".[local]"' in readme
