"""The parts of `trialkit.sandbox.netns` and of `--offline`'s start that need no namespace."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from trialkit.cli._offline import _needs_network
from trialkit.sandbox._host import _decode, _diag_listening, _proc_listening, _reachable


def test_sock_diag_and_proc_net_tcp_list_the_same_listeners() -> None:
    with socket.create_server(("127.0.0.1", 0)) as v4, socket.socket(socket.AF_INET6) as v6:
        v6.bind(("::1", 0))
        v6.listen()
        mine = {
            (ipaddress.ip_address("127.0.0.1"), v4.getsockname()[1]),
            (ipaddress.ip_address("::1"), v6.getsockname()[1]),
        }
        assert mine <= set(_diag_listening())
        assert mine <= set(_proc_listening())
    assert not mine & set(_diag_listening())  # closed: listening no more


def test_proc_net_addresses_are_read_in_host_byte_order() -> None:
    assert _decode("0100007F", 4) == ipaddress.ip_address("127.0.0.1")
    assert _decode("00000000", 4) == ipaddress.ip_address("0.0.0.0")
    assert _decode("00000000000000000000000001000000", 6) == ipaddress.ip_address("::1")
    mapped = _decode("0000000000000000FFFF00000100007F", 6)
    assert mapped == ipaddress.ip_address("::ffff:127.0.0.1")


@pytest.mark.parametrize(
    ("listening", "reached_at"),
    [
        ("127.0.0.1", ["127.0.0.1"]),
        ("127.0.0.53", ["127.0.0.53"]),
        ("0.0.0.0", ["127.0.0.1"]),
        ("::", ["::1", "127.0.0.1"]),
        ("::1", ["::1"]),
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("192.0.2.2", []),  # a service on another address of the machine is never bridged
        ("fd00::2", []),
    ],
)
def test_a_service_is_bridged_only_at_loopback_addresses(
    listening: str, reached_at: list[str]
) -> None:
    assert _reachable(ipaddress.ip_address(listening)) == reached_at


@pytest.mark.parametrize(
    ("store", "executor", "reason"),
    [
        (None, "local", None),
        ("runs.db", "local", None),
        ("sqlite:////tmp/runs.db", "local", None),
        ("postgresql://me@127.0.0.1:5432/runs", "local", None),
        ("postgresql+psycopg://me@localhost/runs", "local", None),
        ("postgresql:///runs?host=/var/run/postgresql", "local", None),
        ("postgresql://me@db.internal:5432/runs", "local", "the store is on db.internal"),
        (None, "ray", "--executor ray reaches its cluster over the network"),
    ],
)
def test_a_command_keeps_the_network_only_when_it_needs_it(
    store: str | None, executor: str, reason: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRIALKIT_STORE", raising=False)
    found = _needs_network(store, executor)
    assert found == reason if reason is None else (found is not None and reason in found)
