"""Control groups for sandboxed processes: memory and process limits that hold for all of a
command's processes together, what was hit, and a kill of every member.

Both hierarchies are handled:

- cgroup v1 (one mount per controller under /sys/fs/cgroup, as in Docker on cgroup v1
  hosts): a group `trialkit-<id>` is made below this process's own group in the `memory`,
  `pids` and `cpuacct` hierarchies that are mounted and writable;
- cgroup v2 (one unified tree): a group below this process's own, when that group lets its
  children use the `memory` and `pids` controllers (its `cgroup.subtree_control` lists them, or
  accepts them: systemd's delegated user slices do; a group that holds processes itself does not,
  by the kernel's rule).

Where neither can be written (no root, no delegation), `Cgroups.probe()` says so and the
limits that need them are not declared.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from trialkit.sandbox.base import LimitName

ROOT = Path("/sys/fs/cgroup")
PREFIX = "trialkit-"
"""A group's name: `trialkit-<pid of trialkit>-<random>`."""


@dataclass(frozen=True)
class Cgroups:
    """Where groups can be made on this machine."""

    version: int
    """1 or 2; 0 when none can be made."""
    parents: dict[str, Path] = field(default_factory=dict)
    """v1: controller -> the writable folder groups are made in; v2: `"unified"` -> it."""
    why_not: str = ""

    @property
    def limits(self) -> frozenset[LimitName]:
        if self.version == 2:
            return frozenset({"memory", "processes"})
        found: set[LimitName] = set()
        if "memory" in self.parents:
            found.add("memory")
        if "pids" in self.parents:
            found.add("processes")
        return frozenset(found)

    @classmethod
    def probe(cls, root: Path = ROOT) -> Cgroups:
        try:
            own = _own_groups()
        except OSError as exc:
            return cls(0, why_not=f"cannot read /proc/self/cgroup: {exc.strerror}")
        unified = own.get("")
        if (root / "cgroup.controllers").exists() and unified is not None:
            return _probe_v2(root / unified.lstrip("/"))
        parents: dict[str, Path] = {}
        for controller in ("memory", "pids", "cpuacct"):
            where = own.get(controller)
            folder = root / controller / (where or "/").lstrip("/")
            if where is not None and folder.is_dir() and _writable(folder):
                parents[controller] = folder
        if parents:
            return cls(1, parents)
        return cls(0, why_not="no writable cgroup (v1 memory/pids or v2 with delegation) here")

    def remove_orphans(self) -> int:
        """Remove the groups of trialkit processes that are gone; how many."""
        names: set[str] = set()
        for parent in self.parents.values():
            for folder in parent.glob(f"{PREFIX}*"):
                pid = folder.name.removeprefix(PREFIX).split("-", 1)[0]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    names.add(folder.name)
        for name in names:
            Group(self.version, {key: p / name for key, p in self.parents.items()}).remove()
        return len(names)

    def group(self, cpu: bool = True) -> Group | None:
        """A new, empty group (with CPU accounting when `cpu`, on v1); `None` when none can
        be made."""
        if self.version == 0:
            return None
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        folders = {
            key: parent / name for key, parent in self.parents.items() if cpu or key != "cpuacct"
        }
        made: list[Path] = []
        try:
            for folder in folders.values():
                folder.mkdir()
                made.append(folder)
        except OSError:
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
            return None
        return Group(self.version, folders)


def _own_groups() -> dict[str, str]:
    groups: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="ascii") as file:
        for line in file:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(","):
                groups[controller] = path
    return groups


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _probe_v2(own: Path) -> Cgroups:
    try:
        available = (own / "cgroup.controllers").read_text().split()
        enabled = (own / "cgroup.subtree_control").read_text().split()
    except OSError as exc:
        return Cgroups(0, why_not=f"cgroup v2 at {own}: {exc.strerror}")
    wanted = {"memory", "pids"}
    if not wanted <= set(available):
        return Cgroups(0, why_not=f"cgroup v2 at {own} does not delegate memory and pids")
    if not wanted <= set(enabled):
        try:
            (own / "cgroup.subtree_control").write_text("+memory +pids")
        except OSError as exc:  # EBUSY: the group holds processes itself
            return Cgroups(0, why_not=f"cgroup v2 at {own}: cannot enable memory, pids: {exc}")
    if not _writable(own):
        return Cgroups(0, why_not=f"cgroup v2 at {own} is not writable")
    return Cgroups(2, {"unified": own})


class Group:
    """One command's group (in each v1 hierarchy, or the v2 tree)."""

    def __init__(self, version: int, folders: dict[str, Path]) -> None:
        self.version = version
        self.folders = folders

    def _file(self, controller: str, name: str) -> Path | None:
        folder = self.folders.get("unified" if self.version == 2 else controller)
        return None if folder is None else folder / name

    def _write(self, controller: str, name: str, value: str) -> None:
        path = self._file(controller, name)
        if path is not None and path.exists():
            path.write_text(value)

    def set_limits(self, memory_bytes: int | None, processes: int | None) -> None:
        if memory_bytes is not None:
            if self.version == 2:
                self._write("memory", "memory.max", str(memory_bytes))
                self._write("memory", "memory.swap.max", "0")
            else:
                self._write("memory", "memory.limit_in_bytes", str(memory_bytes))
                self._write("memory", "memory.memsw.limit_in_bytes", str(memory_bytes))
        if processes is not None:
            self._write("pids", "pids.max", str(processes))

    def add(self, pid: int) -> None:
        """Move process `pid` (and the children it makes from now on) into the group."""
        for folder in self.folders.values():
            (folder / "cgroup.procs").write_text(str(pid))

    def events(self) -> tuple[int, int]:
        """How many out-of-memory kills and refused forks the group has seen so far."""
        memory = "memory.events" if self.version == 2 else "memory.oom_control"
        return (
            _count(self._file("memory", memory), "oom_kill"),
            _count(self._file("pids", "pids.events"), "max"),
        )

    def hit(self, since: tuple[int, int] = (0, 0)) -> LimitName | None:
        """The limit that was hit after the `events()` of `since`, memory first (an
        out-of-memory kill ends a process; a full process table only refuses a fork)."""
        kills, refusals = self.events()
        if kills > since[0]:
            return "memory"
        if refusals > since[1]:
            return "processes"
        return None

    def cpu_seconds(self) -> float | None:
        """CPU time used by the group's processes so far."""
        if self.version == 2:
            usage = _count(self._file("memory", "cpu.stat"), "usage_usec")
            return usage / 1e6
        path = self._file("cpuacct", "cpuacct.usage")
        if path is None:
            return None
        try:
            return int(path.read_text()) / 1e9
        except (OSError, ValueError):
            return None

    def members(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders.values():
            with contextlib.suppress(OSError, ValueError):
                found |= {int(pid) for pid in (folder / "cgroup.procs").read_text().split()}
        return found

    def remove(self, wait_s: float = 2.0) -> None:
        """Kill every member, then remove the group (members take a moment to leave)."""
        kill = self._file("pids", "cgroup.kill") if self.version == 2 else None
        if kill is not None and kill.exists():
            with contextlib.suppress(OSError):
                kill.write_text("1")
        deadline = time.monotonic() + wait_s
        while (members := self.members()) and time.monotonic() < deadline:
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        for folder in self.folders.values():
            with contextlib.suppress(OSError):
                folder.rmdir()


def _count(path: Path | None, key: str) -> int:
    if path is None:
        return 0
    try:
        text = path.read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0
