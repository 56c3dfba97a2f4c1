"""The `allowlist` network (`trialkit.sandbox._allow`) with real bwrap and docker, every server
on this machine's loopback: an allowed destination answers inside, by address and by its name
(mapped in the sandbox's /etc/hosts, the name resolved outside: a fake resolver here, so no
lookup leaves the machine); a non-loopback allowed address is an address of the sandbox's own
`lo` (nothing is sent to it); a port of the host that is not allowed is refused, and any other
address fails at once (no route). The model endpoints stay reachable as under model-only."""

from __future__ import annotations

import json
import os
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from tests.sandbox._bwrap import bwrap_provider
from trialkit.sandbox import _allow
from trialkit.sandbox.base import (
    NetworkPolicy,
    SandboxError,
    SandboxPolicy,
    SandboxProvider,
    refusal,
)

PROBE = r"""
import json, socket, sys
seen = {}
for key, host, port in json.loads(sys.argv[1]):
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            seen[key] = "ok " + sock.recv(100).decode().strip()
    except OSError as exc:
        seen[key] = "error " + (exc.strerror or str(exc))
try:
    seen["resolved"] = socket.gethostbyname("allowed.test")
except OSError as exc:
    seen["resolved"] = "error " + str(exc)
for key, address in (("lo-added", "192.0.2.7"), ("lo-other", "192.0.2.8")):
    with socket.socket() as sock:
        try:
            sock.bind((address, 0))
            seen[key] = "bound"
        except OSError as exc:
            seen[key] = "error " + (exc.strerror or str(exc))
print(json.dumps(seen))
"""


class _Tagged(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(self.server.tag)  # type: ignore[attr-defined]


@contextmanager
def _server(address: str, tag: str) -> Iterator[int]:
    server = socketserver.ThreadingTCPServer((address, 0), _Tagged)
    server.daemon_threads = True
    server.tag = f"{tag}\n".encode()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _fake_lookup(name: str, port: int) -> list[str]:
    if name == "allowed.test":
        return ["127.0.0.2"]
    raise OSError(f"no such name in the test: {name}")


def _probe(
    provider: SandboxProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    monkeypatch.setattr(_allow, "lookup", _fake_lookup)
    with (
        _server("127.0.0.2", "by-name") as named,
        _server("127.0.0.1", "by-address") as direct,
        _server("127.0.0.1", "model") as model,
        _server("127.0.0.1", "secret") as secret,
    ):
        allow = (f"allowed.test:{named}", f"127.0.0.1:{direct}", f"http://192.0.2.7:{named}/")
        image = provider.default_policy().image
        policy = SandboxPolicy(provider.name, NetworkPolicy("allowlist", allow), image=image)
        provider.check(policy)
        targets = [
            ["name", "allowed.test", named],
            ["address", "127.0.0.1", direct],
            ["model", "127.0.0.1", model],
            ["secret", "127.0.0.1", secret],
            ["named-other-port", "127.0.0.2", secret],
            ["test-net", "192.0.2.1", 80],
        ]

        async def main() -> dict[str, str]:
            await provider.setup(policy)
            async with provider.sandbox(
                workspace, policy, [f"http://127.0.0.1:{model}/v1"]
            ) as sandbox:
                result = await sandbox.exec(
                    ["python3", "-c", PROBE, json.dumps(targets)], timeout=60
                )
                assert result.returncode == 0, result.stderr_text
                seen: dict[str, str] = json.loads(result.stdout_text)
                await sandbox.set_phase("grader")  # its network: none (the default)
                result = await sandbox.exec(
                    ["python3", "-c", PROBE, json.dumps(targets)], timeout=60
                )
                assert result.returncode == 0, result.stderr_text
                after = json.loads(result.stdout_text)
                seen |= {f"grader {key}": value for key, value in after.items()}
                return seen

        return anyio.run(main)


def _assert_held(seen: dict[str, str]) -> None:
    assert seen["resolved"] == "127.0.0.2"  # the sandbox's /etc/hosts
    assert seen["lo-added"] == "bound"  # the allowed address is the sandbox's own
    assert seen["lo-other"].startswith("error")  # any other is not
    assert {key: seen[key] for key in ("name", "address", "model")} == {
        "name": "ok by-name",
        "address": "ok by-address",
        "model": "ok model",
    }
    assert seen["secret"] == "error Connection refused"
    assert seen["named-other-port"] == "error Connection refused"
    assert seen["test-net"] == "error Network is unreachable"
    for key in ("name", "address", "model"):  # the graders' network is none
        assert seen[f"grader {key}"].startswith("error"), seen


needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="the allowlist needs root"
)


@needs_root
def test_bwrap_allowlist_reaches_the_allowed_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = bwrap_provider()
    assert "allowlist" in provider.capabilities().network
    _assert_held(_probe(provider, tmp_path, monkeypatch))


@needs_root
def test_docker_allowlist_reaches_the_allowed_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.sandbox._docker import container_provider

    provider = container_provider("docker")
    assert "allowlist" in provider.capabilities().network
    _assert_held(_probe(provider, tmp_path, monkeypatch))


@pytest.mark.parametrize(
    "entry", ["api.example.com", "http//x", "host:0", "host:99999", ":443", "a b:x"]
)
def test_a_bad_allow_entry_is_one_line_naming_it(entry: str) -> None:
    with pytest.raises(SandboxError, match=r"^network allow: .* is not host:port or a URL"):
        _allow.destinations([entry])


def test_entries_give_host_and_port_urls_too() -> None:
    assert _allow.destinations(
        ["api.example.com:443", "https://models.example.org/v1", "[::1]:8080", "10.0.0.1:22"]
    ) == [("api.example.com", 443), ("models.example.org", 443), ("::1", 8080), ("10.0.0.1", 22)]


def test_a_name_that_does_not_resolve_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_allow, "lookup", _fake_lookup)
    with pytest.raises(SandboxError, match=r"^network allow: cannot resolve 'nowhere.test'"):
        _allow.resolve(["nowhere.test:80"])


def test_without_root_the_allowlist_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trialkit.sandbox.bwrap import BwrapProvider
    from trialkit.sandbox.docker import DockerProvider

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    policy = SandboxPolicy("bwrap", network=NetworkPolicy("allowlist", ("a.test:1",)))
    for provider in (BwrapProvider(), DockerProvider()):
        assert "allowlist" not in provider.capabilities().network
        line = refusal(provider.name, provider.capabilities(), policy)
        assert line is not None
        assert "cannot enforce network 'allowlist' (agent)" in line and "\n" not in line
