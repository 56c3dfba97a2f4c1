"""PostgreSQL going away mid-run: the run cannot finish (exit 4), in one line naming the store,
what finished is stored, and `--resume` continues once the server is back.

The store reaches the real test server through a TCP relay on 127.0.0.1; the agent stops the
relay mid-run, which is what trialkit sees of a stopped server: connections reset, then
refused. The server itself, and the other tests' schemas, are never touched.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import anyio
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from tests.store.conftest import postgres_schema_url
from trialkit import Suite, Task
from trialkit._errors import RunFailed
from trialkit.run.runner import Runner
from trialkit.store import Store
from trialkit.store.writer_process import MODE_ENV_VAR


class Relay:
    """Forwards loopback connections to `target` until `stop()`, which resets them all."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.stopped = False
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # stopped
            pair = [client]
            with contextlib.suppress(OSError):
                pair.append(socket.create_connection(self.target, timeout=10))
            with self.lock:
                if self.stopped or len(pair) < 2:  # accepted as it stopped: reset it too
                    for sock in pair:
                        sock.close()
                    continue
                self.sockets += pair
            client, server = pair
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        self.listener.close()
        with self.lock:
            self.stopped = True
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
                    sock.close()


@pytest.fixture
def schema_url(postgres_admin: Engine) -> Iterator[str]:
    yield from postgres_schema_url(postgres_admin)


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_postgres_gone_mid_run_is_exit_4_and_resume_finishes(
    schema_url: str, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV_VAR, writer)  # the trials saved in this process, or by a writer
    real = make_url(schema_url)
    relay = Relay((real.host or "127.0.0.1", real.port or 5432))
    through_relay = real.set(host="127.0.0.1", port=relay.port).render_as_string(
        hide_password=False
    )
    calls: list[str] = []

    def agent(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 3:
            time.sleep(0.5)  # the writer commits the first trials meanwhile
            relay.stop()
        return "ok"

    suite = Suite(id="s", harness=agent, tasks=[Task(id=f"t{i}", input=str(i)) for i in range(6)])
    store = Store(through_relay)
    runner = Runner(store=store, concurrency=1)
    try:
        with pytest.raises(RunFailed) as raised:
            anyio.run(runner.run, suite)
    finally:
        store.close()
        relay.stop()  # again: whatever it accepted since is reset and closed too
    message = str(raised.value)
    assert "\n" not in message
    assert f"127.0.0.1:{relay.port}" in message  # the store, by its URL (password hidden)
    assert f":{real.password}@" not in message
    assert message.endswith(f"resuming run {raised.value.run_id} continues")

    with Store(schema_url) as back:  # the server was there all along: the run can finish
        with back._engine.connect() as conn:
            saved = conn.execute(text("select count(*) from trials")).scalar_one()
        assert saved == raised.value.stored
        report = anyio.run(
            lambda: Runner(store=back, concurrency=1).run(suite, resume=raised.value.run_id)
        )
    assert report.summary.trials == 6
    assert report.summary.passed == 6
