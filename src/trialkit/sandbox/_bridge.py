"""The `model-only` network of a sandbox whose network namespace is its own (bwrap): trialkit's
endpoints (its model proxy, its MCP servers) reached inside at the same loopback URLs.

A socket belongs to the network namespace it was made in. So a short-lived thread of trialkit
enters the sandbox's namespace (`setns`, which needs CAP_SYS_ADMIN over it: root, which owns
the sandbox's user namespace), makes a listening socket at each endpoint's loopback address and
port, and leaves; trialkit then accepts on those sockets from its own namespace and relays each
connection to the endpoint on this machine's loopback, as `netns`'s bridge does (its `_pump`).
Nothing else is listening inside: any other port of 127.0.0.1 is refused, and any other
address is unreachable at once (the namespace has only its loopback).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import socket
import threading
from collections.abc import Sequence
from urllib.parse import urlsplit

from trialkit.sandbox._host import NEVER_BRIDGED, _connected
from trialkit.sandbox._relay import Relay
from trialkit.sandbox.base import SandboxError
from trialkit.sandbox.netns import CLONE_NEWNET, _loopback_addresses, _pump

__all__ = ["Bridge", "can_enter", "loopback_endpoints"]


def can_enter() -> str | None:
    """Why this process cannot enter another network namespace, or `None` when it can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the model-only network of bwrap needs root here (setns into the sandbox)"
    return None


def loopback_endpoints(urls: Sequence[str]) -> list[tuple[str, int]]:
    """The (loopback address, port) pairs of `urls`; `SandboxError` for a URL that is not on
    this machine's loopback (the model-only network bridges nothing else)."""
    found: dict[tuple[str, int], None] = {}
    for url in urls:
        parts = urlsplit(url if "//" in url else f"//{url}")
        try:
            port = parts.port or {"https": 443, "ws": 80, "wss": 443}.get(parts.scheme, 80)
        except ValueError:
            raise SandboxError(f"endpoint {url!r}: not a URL with a port") from None
        addresses = list(_loopback_addresses(parts.hostname or ""))
        if not addresses or port in NEVER_BRIDGED:
            raise SandboxError(f"endpoint {url!r}: the model-only network bridges loopback only")
        for address in addresses:
            found[(address, port)] = None
    return list(found)


class Bridge:
    """Listeners inside one sandbox's network namespace, relayed to this machine's loopback."""

    def __init__(self, endpoints: Sequence[tuple[str, int]]) -> None:
        self.endpoints = list(endpoints)
        self.listeners: list[socket.socket] = []
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.closed = False
        self.thread: threading.Thread | None = None
        self.relays: list[Relay] = []
        """More listeners in the same namespace (an allowlist's), closed with it."""

    def open(self, pid: int) -> None:
        """Listen at every endpoint inside the network namespace of process `pid`."""
        if not self.endpoints:
            return
        made: list[socket.socket | BaseException] = []
        worker = threading.Thread(target=self._listen_in, args=(pid, made), daemon=True)
        worker.start()
        worker.join()
        errors = [item for item in made if isinstance(item, BaseException)]
        self.listeners = [item for item in made if isinstance(item, socket.socket)]
        if errors:
            self.close()
            raise SandboxError(f"cannot bridge the model-only network: {errors[0]}")
        for listener in self.listeners:
            listener.setblocking(False)
            self.selector.register(listener, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        self.thread = threading.Thread(target=self._accept, name="trialkit-sandbox-bridge")
        self.thread.daemon = True
        self.thread.start()

    def _listen_in(self, pid: int, made: list[socket.socket | BaseException]) -> None:
        # the thread ends here, so even a failed return leaves no thread in the sandbox's net
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                if libc.setns(target, CLONE_NEWNET) != 0:
                    code = ctypes.get_errno()
                    made.append(OSError(code, f"setns: {os.strerror(code)}"))
                    return
            finally:
                os.close(target)
            for address, port in self.endpoints:
                listener = _listener(address, port)
                if listener is not None:
                    made.append(listener)
            if libc.setns(own, CLONE_NEWNET) != 0:  # pragma: no cover - back to our own
                made.append(OSError(ctypes.get_errno(), "setns back"))
        except OSError as exc:
            made.append(exc)
        finally:
            os.close(own)

    def _accept(self) -> None:
        while not self.closed:
            for key, _ in self.selector.select():
                if key.fileobj is self.wake_r:
                    return
                listener: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                client.setblocking(True)
                address, port = listener.getsockname()[:2]
                relay = threading.Thread(target=_relay, args=(client, address, port))
                relay.daemon = True
                relay.start()

    def close(self) -> None:
        self.closed = True
        for relay in self.relays:
            relay.close()
        with contextlib.suppress(OSError):
            self.wake_w.send(b"x")
        if self.thread is not None:
            self.thread.join(timeout=1.0)
        for listener in self.listeners:
            listener.close()
        self.selector.close()
        self.wake_r.close()
        self.wake_w.close()


def _listener(address: str, port: int) -> socket.socket | BaseException | None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        return None if family == socket.AF_INET6 else exc
    try:
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        # no IPv6 loopback inside: "localhost" is still served on 127.0.0.1
        return None if family == socket.AF_INET6 else exc
    return sock


def _relay(client: socket.socket, address: str, port: int) -> None:
    with client:
        service = _connected(address, port)
        if isinstance(service, bytes):
            return
        with service:
            service.settimeout(None)
            back = threading.Thread(target=_pump, args=(service, client), daemon=True)
            back.start()
            _pump(client, service)
            back.join()
