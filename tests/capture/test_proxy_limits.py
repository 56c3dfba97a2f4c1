"""The model proxy under abuse, with real sockets on 127.0.0.1: a request without a live token
is refused before a byte of its body is read, a compressed body is inflated only up to the size
limit, slow or unfinished requests and idle connections are timed out, and the open connections
are capped (the longest-idle closed for a new one, 503 when all are busy). The memory each case
costs the process is measured with tracemalloc (the proxy serves from a thread of it); every
loop here is bounded by a count, and the time limits are the proxy's own, set short."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import zstandard

from tests.capture.helpers import KEY
from tests.fakes.provider_server import Hold, ProviderServer, Reply
from trialkit.capture.proxy import ModelProxy, ProxyLimits, ProxyTrial
from trialkit.models.context import ModelSettings
from trialkit.transcript import TranscriptRecorder

MESSAGE = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}
MiB = 1024 * 1024
SOCKET_TIMEOUT = 20.0
"""How long a test waits on a socket for what the proxy must do: far beyond its own limits."""


@pytest.fixture
def start() -> Iterator[Callable[..., ModelProxy]]:
    """Starts a proxy with the given limits (stopped after the test)."""
    started: list[ModelProxy] = []

    def make(**limits: Any) -> ModelProxy:
        proxy = ModelProxy(ProxyLimits(**limits)).start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


def open_trial(proxy: ModelProxy, server: ProviderServer) -> ProxyTrial:
    upstreams = {"anthropic": server.anthropic_base_url, "openai": server.openai_base_url}
    recorder = TranscriptRecorder(task_id="t", trial_index=0)
    return proxy.open_trial(recorder, ModelSettings(), upstreams)


def connect(proxy: ModelProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=SOCKET_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(path: str, length: int, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"x-api-key: {KEY}\r\ncontent-length: {length}\r\n{extra}\r\n"
    ).encode()


def answer_of(sock: socket.socket) -> bytes:
    """What the proxy sent until it closed the connection (bounded by the socket's timeout and
    a count of reads)."""
    received = b""
    for _ in range(10_000):
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            break
        if not piece:
            break
        received += piece
    return received


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def message_of(answer: bytes) -> str:
    return str(json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"])


def traced_peak(action: Callable[[], Any]) -> tuple[Any, int]:
    """What `action` returned and the peak of memory allocated while it ran (every thread)."""
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- the token before the body --------------------------------------------------------------------


def test_a_request_without_a_live_token_is_refused_before_its_body(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start()
    open_trial(proxy, provider_server)
    with connect(proxy) as sock:  # headers that promise 60 MB, and not a byte of it sent
        sock.sendall(head("/trialkit/not-a-token/anthropic/v1/messages", 60 * MiB))
        answer = answer_of(sock)
    assert status_of(answer) == 403
    assert "token" in message_of(answer)
    assert b"connection: close" in answer.lower()
    assert provider_server.connections == 0


def test_bodies_sent_without_a_live_token_are_never_held(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    """8 clients at once each send a 16 MiB body with a wrong token: the proxy answers each
    403 and drops what it still receives; it never holds a body (it held all 8 before)."""
    proxy = start()
    open_trial(proxy, provider_server)
    body = memoryview(b"x" * (16 * MiB))  # made before measuring: the clients' own memory
    answers: list[bytes] = []

    def client() -> None:
        with connect(proxy) as sock:
            sock.sendall(head("/trialkit/wrong/anthropic/v1/messages", len(body)))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(body)  # the proxy may close before the end, once it lingered enough
            answers.append(answer_of(sock))

    def flood() -> None:
        threads = [threading.Thread(target=client) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SOCKET_TIMEOUT * 3)

    _, peak = traced_peak(flood)
    assert [status_of(a) for a in answers] == [403] * 8
    assert peak < 8 * MiB, f"{peak:,} bytes at the peak"
    assert proxy.refused == 8 and provider_server.connections == 0


def test_a_body_over_the_limit_is_refused_by_its_length_unread(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(max_body_bytes=1 * MiB)
    trial = open_trial(proxy, provider_server)
    with connect(proxy) as sock:
        sock.sendall(head(f"/trialkit/{trial.token}/anthropic/v1/messages", 2 * MiB))
        answer = answer_of(sock)
    assert status_of(answer) == 413
    assert "1,048,576 bytes" in message_of(answer)
    assert provider_server.connections == 0


def test_a_client_that_waits_for_100_continue_is_told_to_send(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start()
    trial = open_trial(proxy, provider_server)
    body = json.dumps(MESSAGE).encode()
    path = f"/trialkit/{trial.token}/anthropic/v1/messages"
    with connect(proxy) as sock:
        sock.sendall(head(path, len(body), "expect: 100-continue\r\nconnection: close\r\n"))
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(body)
        answer = answer_of(sock)
    assert status_of(answer) == 200
    assert provider_server.request_count == 1


# -- decompression, bounded -----------------------------------------------------------------------

ZEROS = 200 * MiB  # what each bomb inflates to


def _bombs() -> dict[str, tuple[str, bytes]]:
    zeros = b"\0" * ZEROS
    bombs = {
        "deflate": ("deflate", zlib.compress(zeros, 9)),
        "raw_deflate": ("deflate", _raw_deflate(zeros)),
        "gzip": ("gzip", gzip.compress(zeros, 9)),
        "gzip_members": ("gzip", gzip.compress(zeros[: ZEROS // 2]) * 2),
        "zstd": ("zstd", zstandard.ZstdCompressor(level=3).compress(zeros)),
        "deflate_in_gzip": ("deflate, gzip", gzip.compress(zlib.compress(zeros, 9), 9)),
    }
    try:
        import brotli  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        bombs["br"] = ("br", brotli.compress(zeros, quality=5))
    return bombs


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[str, bytes]]:
    return _bombs()


@pytest.mark.parametrize(
    "kind", ["deflate", "raw_deflate", "gzip", "gzip_members", "zstd", "deflate_in_gzip", "br"]
)
def test_a_compressed_body_is_inflated_only_up_to_the_limit(
    kind: str,
    bombs: dict[str, tuple[str, bytes]],
    start: Callable[..., ModelProxy],
    provider_server: ProviderServer,
) -> None:
    if kind not in bombs:
        pytest.skip("brotli is not installed")
    coding, compressed = bombs[kind]
    assert len(compressed) < 1 * MiB  # e.g. deflate: ~200 KB for 200 MiB
    proxy = start(max_body_bytes=4 * MiB)
    trial = open_trial(proxy, provider_server)

    def post() -> httpx.Response:
        return httpx.post(
            f"{trial.anthropic_base_url}/v1/messages",
            content=compressed,
            headers={"content-encoding": coding, "content-type": "application/json"},
            timeout=SOCKET_TIMEOUT,
        )

    answer, peak = traced_peak(post)
    assert answer.status_code == 413, answer.text
    assert "4,194,304 bytes uncompressed" in answer.json()["error"]["message"]
    assert peak < 3 * 4 * MiB, f"{peak:,} bytes at the peak"  # it inflated 200 MiB before
    assert provider_server.connections == 0


def test_a_compressed_body_under_the_limit_still_reaches_the_upstream(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(max_body_bytes=4 * MiB)
    trial = open_trial(proxy, provider_server)
    body = json.dumps({**MESSAGE, "system": "s" * (3 * MiB)}).encode()
    for coding, compressed in [
        ("deflate", zlib.compress(body)),
        ("gzip", gzip.compress(body[:100]) + gzip.compress(body[100:])),
        ("zstd", zstandard.ZstdCompressor().compress(body)),
    ]:
        answer = httpx.post(
            f"{trial.anthropic_base_url}/v1/messages",
            content=compressed,
            headers={"content-encoding": coding, "content-type": "application/json"},
            timeout=SOCKET_TIMEOUT,
        )
        assert answer.status_code == 200, (coding, answer.text)
        assert provider_server.last_request.body == body


# -- time limits ----------------------------------------------------------------------------------


def test_headers_dribbled_byte_by_byte_are_timed_out(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(head_timeout_s=0.5)
    trial = open_trial(proxy, provider_server)
    dribble = head(f"/trialkit/{trial.token}/anthropic/v1/messages", 10)
    with connect(proxy) as sock:
        sock.settimeout(0.1)
        answer = b""
        for byte in dribble[:200]:  # a slowloris: one byte, then a pause
            try:
                sock.sendall(bytes([byte]))
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if answer:
                break
        sock.settimeout(SOCKET_TIMEOUT)
        answer += answer_of(sock)
    assert status_of(answer) == 408
    assert "line and headers did not arrive within 0.5 s" in message_of(answer)
    assert provider_server.connections == 0


def test_an_unfinished_body_is_timed_out(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(body_timeout_s=0.5)
    trial = open_trial(proxy, provider_server)
    with connect(proxy) as sock:
        sock.sendall(head(f"/trialkit/{trial.token}/anthropic/v1/messages", 1000) + b'{"mod')
        answer = answer_of(sock)
    assert status_of(answer) == 408
    assert "body did not arrive within 0.5 s" in message_of(answer)
    assert provider_server.connections == 0
    assert trial.settle(timeout=5)


def test_idle_connections_are_closed(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(idle_timeout_s=0.5)
    trial = open_trial(proxy, provider_server)
    fresh = [connect(proxy) for _ in range(20)]  # never send a byte
    kept_alive = connect(proxy)  # one request, then silence
    kept_alive.sendall(
        f"HEAD /trialkit/{trial.token}/anthropic HTTP/1.1\r\nhost: x\r\n\r\n".encode()
    )
    assert kept_alive.recv(65536).startswith(b"HTTP/1.1 200")
    for sock in [*fresh, kept_alive]:
        assert answer_of(sock) == b""  # closed by the proxy, without an answer
        sock.close()
    for _ in range(500):  # the proxy's side of them is gone too
        if proxy.open_connections == 0:
            break
        threading.Event().wait(0.01)
    assert proxy.open_connections == 0


def test_an_answer_the_client_does_not_read_is_given_up(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(write_timeout_s=0.5)
    trial = open_trial(proxy, provider_server)
    provider_server.script(Reply("x" * (16 * MiB)))  # more than the sockets' buffers hold
    body = json.dumps({**MESSAGE, "stream": True}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(SOCKET_TIMEOUT)
    sock.connect(("127.0.0.1", proxy.port))
    with sock:
        sock.sendall(head(f"/trialkit/{trial.token}/anthropic/v1/messages", len(body)) + body)
        assert sock.recv(16).startswith(b"HTTP/1.1 200")  # then it reads nothing more
        for _ in range(1000):
            if provider_server.request_count:
                break
            threading.Event().wait(0.01)
        assert trial.settle(timeout=SOCKET_TIMEOUT)  # not stuck on a client that never reads
        for _ in range(1000):
            if proxy.open_connections == 0:
                break
            threading.Event().wait(0.01)
        assert proxy.open_connections == 0
    [call] = trial.recorder.transcript.model_calls
    assert call.status == 200


# -- how many connections -------------------------------------------------------------------------


def test_a_flood_of_idle_connections_is_capped_and_a_trial_still_gets_through(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(max_connections=20)
    trial = open_trial(proxy, provider_server)

    def flood() -> list[socket.socket]:
        socks = [connect(proxy) for _ in range(300)]
        for _ in range(1000):  # the proxy has accepted (and closed) all it will
            if proxy.closed_idle >= 280:
                break
            threading.Event().wait(0.01)
        return socks

    socks, peak = traced_peak(flood)
    try:
        assert proxy.open_connections <= 20
        assert proxy.closed_idle >= 280
        assert peak < 8 * MiB, f"{peak:,} bytes at the peak"
        answer = httpx.post(f"{trial.anthropic_base_url}/v1/messages", json=MESSAGE)
        assert answer.status_code == 200  # an idle one made room for it
        assert provider_server.request_count == 1
    finally:
        for sock in socks:
            sock.close()


def test_past_the_cap_with_every_connection_busy_a_new_one_gets_503(
    start: Callable[..., ModelProxy], provider_server: ProviderServer
) -> None:
    proxy = start(max_connections=3)
    trial = open_trial(proxy, provider_server)
    release = threading.Event()
    provider_server.script(*[Hold(release, Reply("held")) for _ in range(3)])
    streamed = {**MESSAGE, "stream": True}
    clients = [httpx.Client(timeout=SOCKET_TIMEOUT) for _ in range(3)]
    held = [
        client.stream("POST", f"{trial.anthropic_base_url}/v1/messages", json=streamed)
        for client in clients
    ]
    try:
        for response in held:
            assert response.__enter__().status_code == 200  # busy: its answer is under way
        with connect(proxy) as sock:
            sock.sendall(head(f"/trialkit/{trial.token}/anthropic/v1/messages", 2) + b"{}")
            answer = answer_of(sock)
        assert status_of(answer) == 503
        assert b"retry-after: 1" in answer.lower()
        assert proxy.turned_away == 1
    finally:
        release.set()
        for response in held:
            response.__exit__(None, None, None)
        for client in clients:
            client.close()
    answer_after = httpx.post(f"{trial.anthropic_base_url}/v1/messages", json=MESSAGE)
    assert answer_after.status_code == 200
