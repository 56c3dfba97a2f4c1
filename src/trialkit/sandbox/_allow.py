"""The `allowlist` network of a sandbox whose network namespace is its own (bwrap, docker and
podman as root): the policy's `allow` destinations reached inside at the same address and port.

Each entry is `host:port` (a name or an IP address; `[v6]:port`) or a URL, whose host and port
are taken. At the sandbox's start every name is resolved *outside* the sandbox. Inside, each
destination address is an address of the namespace's `lo` (added there when it is not a
loopback address: the sandbox's namespace is ours to change as root), with a listener at the
destination's port relayed by trialkit to the real destination (`_relay.Relay`); the sandbox's
`/etc/hosts` maps the allowed names to those addresses. Nothing else is routed: any other
address fails at once (no route), any other port of an allowed address is refused.
"""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import socket
import struct
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from trialkit.sandbox.base import Phase, PolicyRefused, SandboxError, SandboxPolicy

__all__ = [
    "Allowed",
    "add_addresses",
    "allowed_for",
    "check_allow",
    "destinations",
    "hosts_text",
    "lookup",
]

_CLONE_NEWNET = 0x40000000
_RTM_NEWADDR, _NLMSG_ERROR = 20, 2
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_EXCL, _NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


@dataclass(frozen=True)
class Allowed:
    """The resolved destinations of one phase's allowlist."""

    pairs: tuple[tuple[str, int], ...]
    """(IP address, port) reachable inside, relayed to the same outside."""
    names: tuple[tuple[str, str], ...]
    """(name, IP address) lines for the sandbox's /etc/hosts."""

    @property
    def addresses(self) -> list[str]:
        """The addresses to add to the namespace's `lo` (those not on loopback already)."""
        found = dict.fromkeys(address for address, _ in self.pairs)
        return [address for address in found if not ipaddress.ip_address(address).is_loopback]


def destinations(allow: Sequence[str]) -> list[tuple[str, int]]:
    """The (host, port) of each entry; `SandboxError` (one line naming it) for a bad one."""
    found: list[tuple[str, int]] = []
    for entry in allow:
        text = str(entry).strip()
        parts = urlsplit(text if "//" in text else f"//{text}")
        try:
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:
            port = None
        host = (parts.hostname or "").rstrip(".")
        if not host or port is None or not 0 < port < 65536:
            raise SandboxError(
                f"network allow: {entry!r} is not host:port or a URL (e.g. api.example.com:443)"
            )
        found.append((host, port))
    return list(dict.fromkeys(found))


def check_allow(policy: SandboxPolicy) -> None:
    """`PolicyRefused` (one line naming the entry) for an allow entry of `policy` that is not
    host:port or a URL, before any trial (names are resolved at each sandbox's start)."""
    for phase in ("agent", "grader"):
        network = policy.network_for(phase)
        if network.mode == "allowlist":
            try:
                destinations(network.allow)
            except SandboxError as exc:
                raise PolicyRefused(str(exc)) from None


def lookup(name: str, port: int) -> list[str]:
    """The IPv4 addresses of `name`, resolved on this machine (outside any sandbox)."""
    infos = socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve(allow: Sequence[str]) -> Allowed:
    """The allowlist `allow`, its names resolved now; `SandboxError` for one that is not."""
    pairs: dict[tuple[str, int], None] = {}
    names: dict[tuple[str, str], None] = {}
    for host, port in destinations(allow):
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            try:
                addresses = lookup(host, port)
            except OSError as exc:
                raise SandboxError(f"network allow: cannot resolve {host!r}: {exc}") from None
            names.update(((host, address), None) for address in addresses)
        pairs.update(((address, port), None) for address in addresses)
    return Allowed(tuple(pairs), tuple(names))


def allowed_for(policy: SandboxPolicy) -> dict[Phase, Allowed]:
    """Each phase's resolved allowlist, for the phases whose network is `allowlist`."""
    phases: tuple[Phase, ...] = ("agent", "grader")
    return {
        phase: resolve(policy.network_for(phase).allow)
        for phase in phases
        if policy.network_for(phase).mode == "allowlist"
    }


def hosts_text(base: str, allowed: Mapping[Phase, Allowed] | Sequence[Allowed]) -> str:
    """`base` (an /etc/hosts) with a line per allowed name."""
    groups = allowed.values() if isinstance(allowed, Mapping) else allowed
    lines = [f"{address}\t{name}" for group in groups for name, address in group.names]
    return base.rstrip("\n") + "\n# trialkit: the sandbox's allowlist\n" + "\n".join(lines) + "\n"


def add_addresses(netns: str, addresses: Sequence[str]) -> None:
    """Add `addresses` to `lo` in the network namespace at `netns` (a `/proc/PID/ns/net`
    path), from a short-lived thread that enters it; `SandboxError` when it cannot."""
    if not addresses:
        return
    failed: list[str] = []

    def enter_and_add() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(netns, os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                failed.append(f"setns: {os.strerror(ctypes.get_errno())}")
                return
        finally:
            os.close(fd)
        # the thread ends inside the namespace: it is never reused
        try:
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as nl:
                index = socket.if_nametoindex("lo")
                for seq, address in enumerate(addresses, start=1):
                    _new_address(nl, seq, index, ipaddress.ip_address(address))
        except OSError as exc:
            failed.append(f"{exc.strerror or exc}")

    thread = threading.Thread(target=enter_and_add, name="trialkit-allowlist-lo")
    thread.start()
    thread.join()
    if failed:
        raise SandboxError(f"network allowlist: cannot add its addresses inside: {failed[0]}")


def _new_address(
    nl: socket.socket, seq: int, index: int, ip: ipaddress.IPv4Address | ipaddress.IPv6Address
) -> None:
    family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
    packed = ip.packed
    attribute = b"".join(
        struct.pack("=HH", 4 + len(packed), kind) + packed for kind in (_IFA_LOCAL, _IFA_ADDRESS)
    )
    body = struct.pack("=BBBBI", family, ip.max_prefixlen, 0, 0, index) + attribute
    flags = _NLM_F_REQUEST | _NLM_F_ACK | _NLM_F_CREATE | _NLM_F_EXCL
    nl.send(struct.pack("=IHHII", 16 + len(body), _RTM_NEWADDR, flags, seq, 0) + body)
    reply = nl.recv(65536)
    kind = struct.unpack_from("=H", reply, 4)[0]
    if kind == _NLMSG_ERROR:
        code = -struct.unpack_from("=i", reply, 16)[0]
        if code not in (0, errno.EEXIST):
            raise OSError(code, f"{ip}: {os.strerror(code)}")
