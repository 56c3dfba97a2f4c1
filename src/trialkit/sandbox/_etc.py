"""The `/etc` a bwrap sandbox sees: a copy of the allowlisted files and folders of the host's
`/etc`, made once per trialkit process and bound read-only at `/etc` (one mount: binding each
file on its own cost ~1 ms a file here, 27 ms a command). Symbolic links are copied as links
(`alternatives` points into `/usr`). The copy lives in a private (0700) folder of the temp
folder, removed when trialkit exits (or by `trialkit sandbox cleanup` after a kill).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["ETC_ALLOWED", "staged_etc"]

ETC_ALLOWED = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "shells",
    "ssl/certs",
    "ssl/openssl.cnf",
    "terminfo",
    "timezone",
)
"""The files and folders of `/etc` a sandbox sees (read-only), where the host has them. User
names and groups (`passwd`, `group`: no password hashes), name resolution, the dynamic linker,
`alternatives` (the targets of many `/usr/bin` links), certificates, locale and terminal
data. Nothing that holds a secret or a credential."""

_lock = threading.Lock()
_staged: dict[int, Path] = {}


def staged_etc(prefix: str, source: Path = Path("/etc")) -> Path:
    """This process's copy of the allowlisted part of `source` (made on first use)."""
    with _lock:
        found = _staged.get(os.getpid())
        if found is not None and found.is_dir():
            return found
        folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-etc-"))
        etc = folder / "etc"
        etc.mkdir()
        for name in ETC_ALLOWED:
            _copy(source / name, etc / name)
        _staged[os.getpid()] = etc
        atexit.register(_remove, folder, os.getpid())
        return etc


def _remove(folder: Path, owner: int) -> None:
    if os.getpid() == owner:  # never from a forked child that inherited the handler
        shutil.rmtree(folder, ignore_errors=True)


def _copy(path: Path, target: Path) -> None:
    if not (path.exists() or path.is_symlink()):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.copytree(path, target, symlinks=True, ignore_dangling_symlinks=True)
    elif path.is_symlink() and path.name == "localtime":
        shutil.copy2(path, target)  # the zone file itself: its link may be relative
    elif path.is_symlink():
        target.symlink_to(os.readlink(path))
    else:
        with contextlib.suppress(PermissionError):  # unreadable to this user: not shown
            shutil.copy2(path, target)
