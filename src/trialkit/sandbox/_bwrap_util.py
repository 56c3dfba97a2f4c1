"""The small parts of the bwrap provider: its options, bwrap's info, rlimits, user ids, and
what a trial's folders hold."""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path
from typing import Any

from trialkit.sandbox.base import SandboxError


def check_options(options: dict[str, Any]) -> None:
    """`SandboxError` (one line) for an option bwrap does not have or a bad value."""
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise SandboxError(
            f"sandbox 'bwrap': no option {', '.join(unknown)} "
            f"(its options: {', '.join(sorted(_OPTIONS))})"
        )
    for key in ("read_only", "read_write"):
        for path in _paths(key, options.get(key)):
            if path == "/" or not path.startswith("/") or ".." in path.split("/"):
                raise SandboxError(
                    f"sandbox 'bwrap': {key}: {path!r} is not an absolute path below /"
                )
    home = options.get("home")
    if home is not None and (not isinstance(home, str) or not home.startswith("/")):
        raise SandboxError(f"sandbox 'bwrap': home: {home!r} is not an absolute path")


def read_info(fd: int) -> str:
    data = b""
    while b"}" not in data:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")


def set_rlimits(pid: int, cpu_seconds: float | None, disk_bytes: int | None) -> None:
    if cpu_seconds is not None:
        soft = max(1, int(cpu_seconds + 0.999))
        resource.prlimit(pid, resource.RLIMIT_CPU, (soft, soft + 1))
    if disk_bytes is not None:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (disk_bytes, disk_bytes))


def ids(user: str | None) -> tuple[int | None, int | None]:
    if user is None:
        return None, None
    if user == "root":
        return 0, 0
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise SandboxError(f"sandbox 'bwrap': user {user!r}: give root, a uid or uid:gid")
    return int(uid), int(gid or uid)


_OPTIONS = frozenset(
    {"executable", "read_only", "read_write", "home", "allow_host", "starts", "alive"}
)


def _paths(key: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list | tuple) or not all(isinstance(p, str) for p in value):
        raise SandboxError(f"sandbox 'bwrap': {key}: expected a list of paths, got {value!r}")
    return list(value)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def bytes_under(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total
