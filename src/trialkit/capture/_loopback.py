"""Which hosts are this machine, decided without sending anything.

An IP address is this machine when it is a loopback address (`127.0.0.0/8`, `::1`, and
`::ffff:127.x.x.x`). A name is this machine only when the C library answers it from the hosts
file, before any DNS, and answers it with loopback addresses alone: `localhost` (in every hosts
file), and any other name the hosts file maps to loopback. Every other name, `api.localhost`
included, would be looked up in DNS, and that lookup would itself leave the machine (glibc sends
`*.localhost` names to DNS like any other; only some resolvers, such as systemd-resolved, answer
them locally). A reverse lookup (`gethostbyaddr`, `getnameinfo`) stays here only for an address
the hosts file lists.
"""

from __future__ import annotations

import ipaddress
import threading
from pathlib import Path

HOSTS_FILE = Path("/etc/hosts")
NSSWITCH_FILE = Path("/etc/nsswitch.conf")

_lock = threading.Lock()
_cache: tuple[object, dict[str, frozenset[str]]] | None = None


def is_loopback(host: str | bytes) -> bool:
    """Whether `host` (a name or an address, `[::1]` brackets allowed) is this machine."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    name = host.strip("[]").lower().rstrip(".")
    address = _address(name)
    if address is not None:
        return address
    addresses = _hosts().get(name, frozenset())
    return bool(addresses) and all(_address(a) for a in addresses)


def listed(address: str | bytes) -> bool:
    """Whether a reverse lookup of `address` (an address, or a name as `gethostbyaddr` takes)
    is answered from the hosts file, so nothing is sent."""
    if isinstance(address, bytes):
        address = address.decode("ascii", "replace")
    name = address.strip("[]").lower().rstrip(".")
    if _address(name) is None:  # a name: looked up forwards first
        return is_loopback(name)
    try:
        wanted = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return any(_same(wanted, a) for known in _hosts().values() for a in known)


def is_address(text: str) -> bool:
    """Whether `text` is an IP address rather than a name."""
    return _address(text.strip("[]")) is not None


def _address(text: str) -> bool | None:
    """Whether the IP address `text` is loopback; `None` when `text` is not an IP address."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _same(wanted: ipaddress.IPv4Address | ipaddress.IPv6Address, text: str) -> bool:
    try:
        return ipaddress.ip_address(text) == wanted
    except ValueError:
        return False


def _hosts() -> dict[str, frozenset[str]]:
    """Name -> addresses, from the hosts file (read again when it changes); empty when the
    C library would not ask it before DNS."""
    global _cache
    try:
        stat = HOSTS_FILE.stat()
        mark: object = (str(HOSTS_FILE), stat.st_mtime_ns, stat.st_size, stat.st_ino)
    except OSError:
        mark = None
    with _lock:
        if _cache is not None and _cache[0] == mark:
            return _cache[1]
    table: dict[str, set[str]] = {}
    if mark is not None and _files_first():
        try:
            text = HOSTS_FILE.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2 or _address(fields[0]) is None:
                continue
            for name in fields[1:]:
                table.setdefault(name.lower().rstrip("."), set()).add(fields[0])
    frozen = {name: frozenset(addresses) for name, addresses in table.items()}
    with _lock:
        _cache = (mark, frozen)
    return frozen


def _files_first() -> bool:
    """Whether the C library reads the hosts file before any other source of host names
    (`hosts: files ...` in nsswitch.conf; true where there is no nsswitch.conf, as on musl)."""
    try:
        text = NSSWITCH_FILE.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if fields and fields[0] == "hosts:":
            return len(fields) > 1 and fields[1] == "files"
    return True
