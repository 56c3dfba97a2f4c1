"""The host paths a command-line agent runs from, so that a sandbox can bind them in read-only.

A sandbox shows its processes only part of the host (bwrap: `/usr`; a container: its image),
but the agents people have are installed elsewhere: npm's `node_modules` of a project or of a
user's prefix, a virtual environment, `/usr/local/bin` or `/opt`. `runs_from(executable)`
finds, on the host, what running `executable` needs besides the system's own files:

- the folder it is installed in: the outermost `node_modules` above it (npm's optional
  platform packages, which hold Claude Code's and Codex's native programs, are siblings of
  the package), else the virtual environment it is in (a `pyvenv.cfg` above it), else its own
  folder;
- its interpreter when it is a script (`#!/usr/bin/env node`: the `node` found on `PATH`;
  `#!/path/to/python`: that one), which an image may not have. An interpreter is bound as a
  file: it must not need shared libraries the sandbox lacks (NodeSource's and nvm's `node`
  need only the C and C++ runtimes, which a Debian image has).

The presets declare what this finds (`SubprocessAgent.runs_from`); `in_sandbox` hands it to
providers that bind host paths (`SandboxProvider.host_paths_option`), at the same paths.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["SYSTEM_FOLDERS", "runs_from"]

SYSTEM_FOLDERS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/")
"""Where a program is part of the system: bwrap shows these as the host has them."""


def runs_from(executable: str) -> tuple[str, tuple[str, ...]]:
    """`executable` resolved on the host (an absolute path, or unchanged when not found) and
    the host paths running it needs: its installation outside the system's folders and, for
    a script, its interpreter."""
    found = shutil.which(executable)
    if found is None:
        return executable, ()
    found = os.path.abspath(found)
    paths: list[str] = []
    for path in (found, os.path.realpath(found)):
        if not path.startswith(SYSTEM_FOLDERS):
            paths.append(_installation(Path(path)))
    interpreter = _interpreter(Path(found))
    if interpreter is not None:
        paths.append(interpreter)
        real = os.path.realpath(interpreter)
        if real != interpreter:
            paths.append(real)
    return found, tuple(dict.fromkeys(paths))


def _installation(path: Path) -> str:
    """The folder `path` is installed in (see the module's docstring)."""
    outermost: Path | None = None
    for parent in path.parents:
        if parent.name == "node_modules":
            outermost = parent
    if outermost is not None:
        return str(outermost)
    for parent in path.parents:
        if (parent / "pyvenv.cfg").is_file():
            return str(parent)
        if parent.parent == parent:
            break
    return str(path.parent)


def _interpreter(path: Path) -> str | None:
    """The program a script names on its `#!` line, found on the host, or `None`."""
    try:
        with path.open("rb") as file:
            head = file.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(names[0]) if names else None
    else:
        found = words[0] if os.path.isfile(words[0]) else None
    return os.path.abspath(found) if found else None
