"""The helper of `trialkit.sandbox.netns`: a process forked before the namespace is entered,
which stays outside it, in this machine's network namespace, and answers one request at a time
on a Unix socket pair:

- `L`: the loopback (address, port) pairs at which TCP services of this machine listen;
- `P address port`: whether a service listens there now;
- `C address port`: a socket connected to it, handed over with SCM_RIGHTS.

It connects to loopback addresses only, never to port 53, and exits when the namespace's side
of the pair closes (or the process that forked it dies).
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import signal
import socket
import struct

NEVER_BRIDGED = frozenset({53})
"""DNS: a resolver on loopback forwards lookups off the machine."""
CONNECT_TIMEOUT_S = 5.0
_MAX_LISTENERS = 512


def serve(channel: socket.socket) -> None:  # pragma: no cover - runs in the forked helper
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the command, not for it
        _die_with_parent()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # never hold the command's pipes open
            os.dup2(devnull, fd)
        keep = channel.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        while True:
            request = channel.recv(1024)
            if not request:
                break
            op, _, rest = request.decode("ascii", "replace").partition(" ")
            if op == "L":
                listing = "\n".join(f"{a} {p}" for a, p in _listeners()[:_MAX_LISTENERS])
                channel.send(listing.encode("ascii"))
            elif op == "P":
                address, _, port = rest.rpartition(" ")
                channel.send(b"1" if _listened(address, int(port)) else b"0")
            elif op == "C":
                address, _, port = rest.rpartition(" ")
                service = _connected(address, int(port))
                if isinstance(service, bytes):
                    channel.send(service)
                    continue
                with service:
                    socket.send_fds(channel, [b"K"], [service.fileno()])
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked helper
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def _connected(address: str, port: int) -> socket.socket | bytes:
    """A socket connected to `address`:`port` of this machine, or why there is none."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return b"E invalid address"
    if not ip.is_loopback or port in NEVER_BRIDGED or not 0 < port < 65536:
        return b"E not a loopback service"
    sock = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect((address, port))
    except OSError as exc:
        sock.close()
        return f"E {exc.errno or 0}".encode()
    return sock


def _listened(address: str, port: int) -> bool:
    """Whether a service of this machine listens at loopback `address`:`port`, told in a few
    microseconds (reading /proc/net/tcp can take tens of milliseconds): with SO_REUSEADDR,
    binding the same address and port fails only while a socket listens there."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if not ip.is_loopback or port in NEVER_BRIDGED or not 0 < port < 65536:
        return False
    with socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _listeners() -> list[tuple[str, int]]:
    """The loopback (address, port) pairs at which TCP services of this machine listen: a
    service on a wildcard address is reached at 127.0.0.1 or ::1."""
    try:
        listening = _diag_listening()
    except OSError:  # no sock_diag here: /proc/net/tcp{,6}, slower (tens of ms at 6,000 sockets)
        listening = _proc_listening()
    found: dict[tuple[str, int], None] = {}
    for address, port in listening:
        if port not in NEVER_BRIDGED:
            for reached in _reachable(address):
                found[(reached, port)] = None
    return list(found)


_TCP_LISTEN = 10


def _diag_listening() -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """Listening TCP sockets, from the kernel's sock_diag netlink interface (a fraction of a
    millisecond: the kernel picks the listening sockets itself)."""
    found: list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4) as diag:  # NETLINK_SOCK_DIAG
        diag.settimeout(CONNECT_TIMEOUT_S)
        for family in (socket.AF_INET, socket.AF_INET6):
            # inet_diag_req_v2: family, protocol, ext, pad, states, an empty inet_diag_sockid
            request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
            request += bytes(48)
            # nlmsghdr: length, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, pid
            diag.sendto(struct.pack("=IHHII", 16 + len(request), 20, 0x301, 1, 0) + request, (0, 0))
            found += _diag_answers(diag)
    return found


def _diag_answers(
    diag: socket.socket,
) -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    found: list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]] = []
    for _ in range(100_000):  # messages of a dump, until its end
        data = diag.recv(1 << 16)
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            if kind == 3:  # NLMSG_DONE
                return found
            if kind == 2 or length < 16:  # NLMSG_ERROR
                raise OSError("sock_diag refused the request")
            body = offset + 16  # inet_diag_msg: family, state, timer, retrans, sockid...
            family, state = data[body], data[body + 1]
            port = struct.unpack_from("!H", data, body + 4)[0]
            raw = data[body + 8 : body + 8 + (4 if family == socket.AF_INET else 16)]
            if state == _TCP_LISTEN:
                found.append((ipaddress.ip_address(raw), port))
            offset += (length + 3) & ~3
    return found


def _proc_listening() -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    found: list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]] = []
    for name, version in (("tcp", 4), ("tcp6", 6)):
        try:
            with open(f"/proc/net/{name}", encoding="ascii") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4 or fields[3] != "0A":  # LISTEN
                continue
            hex_address, _, hex_port = fields[1].partition(":")
            found.append((_decode(hex_address, version), int(hex_port, 16)))
    return found


def _decode(hex_address: str, version: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # host byte order
    if version == 4:
        return ipaddress.IPv4Address(words)
    return ipaddress.IPv6Address(words)


def _reachable(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[str]:
    """The loopback addresses at which a service listening on `address` is reached."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return [str(address)]
    if address.is_unspecified:
        return ["127.0.0.1"] if address.version == 4 else ["::1", "127.0.0.1"]
    return []
