"""The bridge of a container with no network (`--network none`): trialkit's endpoints (its
model proxy, its MCP servers) reached inside at the same loopback URLs the agent is given.

A listening socket is made *inside* the container's network namespace, at each endpoint's
address and port, by a short-lived thread of this process that enters that namespace
(`setns`, which needs CAP_SYS_ADMIN: root) and leaves again; a socket stays in the namespace it
was made in. Each connection accepted there is relayed by this process to the endpoint on this
machine's loopback. Nothing runs in the container and its image needs nothing; everything
else stays unreachable (a connection to any other address fails at once: no route).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import socket
import threading
from urllib.parse import urlsplit

from trialkit.sandbox.base import SandboxError

__all__ = ["Relay", "endpoint_address", "why_no_relay"]

_CLONE_NEWNET = 0x40000000
_CONNECT_TIMEOUT_S = 10.0


def why_no_relay() -> str | None:
    """Why this process cannot make listeners in a container's namespace, or `None`."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the bridge into a container's network needs root (setns into its namespace)"
    return None


def endpoint_address(url: str) -> tuple[str, int]:
    """The loopback (address, port) of an endpoint URL; `SandboxError` for any other."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if host == "localhost":
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise SandboxError(f"endpoint {url!r}: only loopback endpoints can be bridged")
    return host, port


def _listen_in(netns: str, address: tuple[str, int]) -> socket.socket:
    made: list[socket.socket] = []
    failed: list[str] = []

    def enter_and_listen() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(netns, os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                failed.append(os.strerror(ctypes.get_errno()))
                return
        finally:
            os.close(fd)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(128)
        except OSError as exc:
            listener.close()
            failed.append(exc.strerror or str(exc))
            return
        made.append(listener)

    # the thread ends inside the namespace: it is never reused, so nothing else runs there
    thread = threading.Thread(target=enter_and_listen, name="trialkit-relay-listen")
    thread.start()
    thread.join()
    if not made:
        reason = failed[0] if failed else "unknown"
        raise SandboxError(f"bridge: cannot listen on {address[0]}:{address[1]}: {reason}")
    return made[0]


class Relay:
    """Listeners at `addresses` inside the namespace at `netns` (a `/proc/PID/ns/net` path),
    each relaying to the same address on this machine, until `close()`."""

    def __init__(self, netns: str, addresses: list[tuple[str, int]]) -> None:
        self.netns = netns
        self.addresses: list[tuple[str, int]] = []
        self._listeners: list[socket.socket] = []
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        try:
            self.add(addresses)
        except BaseException:
            self.close()
            raise

    def add(self, addresses: list[tuple[str, int]]) -> None:
        """Listen at `addresses` too (those not listened at yet)."""
        for address in dict.fromkeys(addresses):
            if address in self.addresses:
                continue
            listener = _listen_in(self.netns, address)
            with self._lock:
                self._listeners.append(listener)
                self.addresses.append(address)
            threading.Thread(
                target=self._accept, args=(listener, address), daemon=True, name="trialkit-relay"
            ).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            doomed = [*self._listeners, *self._open]
            self._open.clear()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _track(self, *socks: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._open.update(socks)
            return True

    def _accept(self, listener: socket.socket, address: tuple[str, int]) -> None:
        while True:
            try:
                inside, _ = listener.accept()
            except OSError:
                return
            try:
                outside = socket.create_connection(address, timeout=_CONNECT_TIMEOUT_S)
                outside.settimeout(None)
            except OSError:
                inside.close()
                continue
            if not self._track(inside, outside):
                inside.close()
                outside.close()
                return
            for source, target in ((inside, outside), (outside, inside)):
                threading.Thread(
                    target=self._pump, args=(source, target), daemon=True, name="trialkit-relay"
                ).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(1 << 16):
                target.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
        with self._lock:
            if source in self._open and target in self._open:
                # the first direction to finish leaves both open for the other one
                self._open.discard(source)
                return
            self._open.discard(source)
            self._open.discard(target)
        source.close()
        target.close()
