"""Loopback-only network namespaces (Linux), with this machine's loopback services bridged in.

`enter_loopback_only()` moves the calling process into a network namespace of its own whose
only interface is `lo`: from then on the process, every thread it starts and every program it
runs (subprocesses, `os.system`, code called through `ctypes`, C extensions) can reach nothing
but its own loopback. There is no route off the machine, so a connection to any other address
fails at once with "network unreachable", and a DNS lookup finds no server to ask.

The TCP services listening on the loopback of the machine (a local model server such as
ollama or vLLM, a test's fake provider, a PostgreSQL store on 127.0.0.1) stay reachable at the
same addresses: a *bridge* listens on each of their ports inside the namespace and forwards
every connection to the service. The services listening when the namespace is entered are
bridged at once; one that starts later is bridged when Python code here connects to it (an
audit hook on `socket.connect`). Port 53 (DNS) is never bridged, so no name lookup reaches a
resolver that would forward it. UDP services of the host are not reachable.

The connections to the services are made by a small helper process forked before the
namespace is entered, which stays outside: it connects only to loopback addresses, and hands
each connected socket back over a Unix socket pair. So this works without root, in a user
namespace (`unshare -rn` done in-process), where nothing inside could re-enter the machine's
namespace. With root (CAP_SYS_ADMIN), only the network namespace is new and the process keeps
its user; without, a user namespace maps the process's own user and group to themselves.

The process must not run threads yet when it enters (a namespace is per thread until then:
threads started before would stay outside), so call this first thing in a command.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import selectors
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trialkit.sandbox._host import NEVER_BRIDGED, serve

__all__ = [
    "Namespace",
    "Unavailable",
    "enter_loopback_only",
    "entered",
    "stay_outside",
    "why_not",
]

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


class Unavailable(Exception):
    """This process cannot enter a network namespace here; the message says why."""


@dataclass
class Namespace:
    """The namespace this process entered."""

    user_namespace: bool
    """Entered with a user namespace of its own (no CAP_SYS_ADMIN here)."""
    bridge: _Bridge = field(repr=False)

    @property
    def bridged(self) -> list[tuple[str, int]]:
        """The (address, port) pairs of this machine's loopback services bridged so far."""
        return self.bridge.bridged()


_entered: Namespace | None = None
_why_not: str | None = None


def entered() -> Namespace | None:
    """The namespace this process entered, or `None`."""
    return _entered


def why_not() -> str | None:
    """Why this process is in no namespace, when it tried to enter one (or was kept out)."""
    return _why_not


def stay_outside(reason: str) -> None:
    """Note that this process does not enter a namespace, and why (it needs the network)."""
    global _why_not
    _why_not = reason


def enter_loopback_only() -> Namespace:
    """Move this process into a new loopback-only network namespace, with this machine's
    loopback TCP services bridged in (idempotent); `Unavailable` when it cannot be done, and
    the process is then as it was."""
    global _entered, _why_not
    if _entered is not None:
        return _entered
    try:
        _entered = _enter()
    except Unavailable as exc:
        _why_not = str(exc)
        raise
    return _entered


def _enter() -> Namespace:
    if sys.platform != "linux":
        raise Unavailable("network namespaces are Linux only")
    threads = _threads()
    if threads > 1:
        raise Unavailable(f"this process already runs {threads} threads")
    uid, gid = os.geteuid(), os.getegid()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the helper, outside the namespace
        ours.close()
        serve(theirs)
    theirs.close()
    helper = _Helper(ours, pid)
    try:
        user = _unshare(uid, gid)
        _loopback_up()
    except BaseException:
        helper.close()
        raise
    bridge = _Bridge(helper)
    bridge.start()
    sys.addaudithook(bridge.audit)
    return Namespace(user_namespace=user, bridge=bridge)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _unshare(uid: int, gid: int) -> bool:
    """Unshare the network namespace, in a user namespace of its own when it must be; whether
    a user namespace was made."""
    try:
        _call_unshare(CLONE_NEWNET)
        return False
    except AttributeError:  # a C library without unshare()
        raise Unavailable("this C library has no unshare()") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES):
            raise Unavailable(f"unshare(CLONE_NEWNET): {exc.strerror}") from None
    try:
        _call_unshare(CLONE_NEWUSER | CLONE_NEWNET)
    except OSError as exc:
        raise Unavailable(
            f"unshare(CLONE_NEWNET) needs CAP_SYS_ADMIN, and a user namespace is not allowed "
            f"here ({exc.strerror})"
        ) from None
    try:  # the same user and group inside as outside, so files keep their owners
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:  # pragma: no cover - the kernel allows these to the new namespace
        raise RuntimeError(f"cannot map this user in its new user namespace: {exc}") from exc
    return True


def _call_unshare(flags: int) -> None:
    unshare = getattr(os, "unshare", None)  # Python >= 3.12
    if unshare is not None:
        unshare(flags)
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(text)


def _loopback_up() -> None:
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


class _Helper:
    """The namespace's side of the helper: one request at a time."""

    def __init__(self, channel: socket.socket, pid: int) -> None:
        self.channel = channel
        self.pid = pid
        self.lock = threading.Lock()

    def listeners(self) -> list[tuple[str, int]]:
        try:
            with self.lock:
                self.channel.send(b"L")
                listing = self.channel.recv(1 << 20).decode("ascii")
        except OSError:
            return []
        pairs = (line.rpartition(" ") for line in listing.splitlines())
        return [(address, int(port)) for address, _, port in pairs if port.isdigit()]

    def listens(self, address: str, port: int) -> bool:
        try:
            with self.lock:
                self.channel.send(f"P {address} {port}".encode("ascii"))
                return self.channel.recv(8) == b"1"
        except OSError:  # the helper is gone (killed with the command): nothing is bridged
            return False

    def connect(self, address: str, port: int) -> socket.socket | None:
        try:
            with self.lock:
                self.channel.send(f"C {address} {port}".encode("ascii"))
                message, fds, _, _ = socket.recv_fds(self.channel, 64, 1)
        except OSError:
            return None
        if message[:1] != b"K" or not fds:
            for fd in fds:
                os.close(fd)
            return None
        service = socket.socket(fileno=fds[0])
        service.setblocking(True)  # the helper connected it with a timeout: non-blocking
        return service

    def close(self) -> None:
        self.channel.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


# -- the bridge: listeners inside the namespace -----------------------------------------------


class _Bridge:
    """Listens inside the namespace at each bridged (address, port), and relays every
    connection to the service of the same address and port outside."""

    def __init__(self, helper: _Helper) -> None:
        self.helper = helper
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.listening: dict[tuple[str, int], socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.selector.register(self.wake_r, selectors.EVENT_READ, None)

    def start(self) -> None:
        for address, port in self.helper.listeners():
            self._listen(address, port)
        threading.Thread(target=self._accept, name="trialkit-netns-bridge", daemon=True).start()

    def bridged(self) -> list[tuple[str, int]]:
        with self.lock:
            return sorted(self.listening)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """Bridge a loopback service that started after the namespace was entered, when
        Python code here connects to it."""
        if event != "socket.connect" or os.getpid() != self.pid:  # not in a forked child
            return
        sock, target = args
        if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6):
            return
        if not (isinstance(target, tuple) and len(target) >= 2 and isinstance(target[1], int)):
            return
        host, port = target[0], target[1]
        if port in NEVER_BRIDGED:
            return
        for address in _loopback_addresses(host):
            if (address, port) not in self.listening and self.helper.listens(address, port):
                self._listen(address, port)

    def _listen(self, address: str, port: int) -> bool:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address, port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:  # taken here already (this process serves it), or no IPv6
            sock.close()
            return False
        with self.lock:
            self.listening[(address, port)] = sock
        self.selector.register(sock, selectors.EVENT_READ, (address, port))
        self.wake_w.send(b"x")  # the accept loop waits on the new listener too from now
        return True

    def _accept(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        self.wake_r.recv(4096)
                    continue
                listener: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                client.setblocking(True)
                threading.Thread(target=self._relay, args=(client, *key.data), daemon=True).start()

    def _relay(self, client: socket.socket, address: str, port: int) -> None:
        with client:
            service = self.helper.connect(address, port)
            if service is None:
                return
            with service:
                back = threading.Thread(target=_pump, args=(service, client), daemon=True)
                back.start()
                _pump(client, service)
                back.join()


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until `source` ends, then end `target`'s sending side."""
    try:
        while data := source.recv(1 << 16):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _loopback_addresses(host: Any) -> Iterator[str]:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return
    if host.lower().rstrip(".") == "localhost":
        yield from ("127.0.0.1", "::1")
        return
    try:
        ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return
    if ip.is_loopback:
        yield str(ip)
