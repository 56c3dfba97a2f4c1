"""One trial's container, for the `docker` and `podman` providers (`trialkit.sandbox.docker`):
its start and stop, `docker exec` processes, files, the network of each phase, the limits read
back from its cgroups, and the workspace handed to the container's user for the trial.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import anyio
import anyio.abc

from trialkit.sandbox._allow import Allowed, add_addresses
from trialkit.sandbox._engine import LABEL, LABEL_OWNER, LABEL_RUN, Engine
from trialkit.sandbox._relay import Relay, endpoint_address
from trialkit.sandbox.base import (
    LimitName,
    NetworkMode,
    Phase,
    Sandbox,
    SandboxError,
    SandboxInfo,
    SandboxPolicy,
    SandboxProcess,
    within,
)

__all__ = ["HOME", "ContainerProcess", "ContainerProvider", "ContainerSandbox"]

HOME = "/home/trialkit"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
_READY = b"trialkit-ready\n"
_KEEPER = "echo trialkit-ready; exec cat >/dev/null"
_EXEC_MARK = "TRIALKIT_EXEC"


class ContainerProvider(Protocol):
    """What a trial's container needs of its provider."""

    engine: Engine
    run_id: str
    options: dict[str, Any]

    @property
    def name(self) -> str: ...

    @property
    def tmpfs_owner(self) -> bool:
        """The engine takes `uid=`/`gid=` options for a tmpfs."""

    def init_args(self) -> list[str]: ...

    def extra_run_args(self) -> list[str]: ...


class ContainerProcess(SandboxProcess):
    """A process started by `docker exec`: the client is ours, the process is the container's."""

    def __init__(self, client: anyio.abc.Process, box: ContainerSandbox, mark: str) -> None:
        self.client = client
        self.stdin = client.stdin
        self.stdout = client.stdout
        self.stderr = client.stderr
        self._box = box
        self._mark = mark
        self._before = box.counters()
        self._limit: LimitName | None = None
        self._code: int | None = None

    @property
    def returncode(self) -> int | None:
        return self._code

    async def wait(self) -> int:
        code = await self.client.wait()
        if self._code is None:
            # the client reports a signal that ended the process as 128 + its number
            self._code = -(code - 128) if 128 < code < 128 + 65 else code
            self._limit = self._box.judge(self._before, self._code)
            # what it left running (`setsid`, double forks, `&`) ends with it
            await anyio.to_thread.run_sync(self._box.kill_marked, self._mark)
        return self._code

    async def kill(self) -> None:
        self._box.kill_marked(self._mark)
        if self.client.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.client.send_signal(signal.SIGKILL)

    def limit(self) -> LimitName | None:
        return self._limit

    async def aclose(self) -> None:
        if self.returncode is None:
            await self.kill()
        await self.wait()
        await self.client.aclose()


class ContainerSandbox(Sandbox):
    """One trial's container (see the module's docstring)."""

    def __init__(
        self, provider: ContainerProvider, workspace: Path, policy: SandboxPolicy, image: str
    ) -> None:
        super().__init__(PurePosixPath(workspace), policy)
        self.kind = provider.name
        self.root = workspace
        self.image = image
        self.engine = provider.engine
        self.name = f"trialkit-{provider.run_id[:12]}-{secrets.token_hex(4)}"
        self.user = policy.user or provider.options.get("user") or _default_user()
        self.pid = 0
        self.relay: Relay | None = None
        self.endpoints: list[tuple[str, int]] = []
        self.allowed: dict[Phase, Allowed] = {}
        """Each `allowlist` phase's destinations, resolved before the container starts."""
        self._relaying_allowed = False
        self.processes: list[ContainerProcess] = []
        self._groups: dict[str, Path] = {}
        self._owner: tuple[int, int] | None = None

    @property
    def info(self) -> SandboxInfo:
        return SandboxInfo(
            provider=self.kind,
            isolated=True,
            network=self.policy.network.mode,
            grader_network=self.policy.grader_network.mode,
            limits=_recorded(self.policy),
            image=self.image,
            details={"engine": self.engine.binary, "container": self.name, "user": self.user},
        )

    def run_args(self, provider: ContainerProvider) -> list[str]:
        policy, limits, ws = self.policy, self.policy.limits, str(self.workspace)
        uid, gid = _ids(self.user)
        home = f"{HOME}:rw,exec,mode=0700,uid={uid},gid={gid}"
        if uid is None or not provider.tmpfs_owner:
            home = f"{HOME}:rw,exec,mode=1777"  # private to the container all the same
        args = [
            "run", "--interactive", "--rm", *provider.init_args(), *self.engine.run_args(),
            "--name", self.name,
            "--label", f"{LABEL}={self.kind}",
            "--label", f"{LABEL_RUN}={provider.run_id}",
            "--label", f"{LABEL_OWNER}={os.uname().nodename}:{os.getpid()}",
            "--network", "host" if policy.network.mode == "host" else "none",
            "--user", self.user,
            "--security-opt", "no-new-privileges",
            "--volume", f"{ws}:{ws}:rw", "--workdir", ws,
            "--tmpfs", "/tmp:rw,exec,mode=1777", "--tmpfs", home,
            "--env", f"HOME={HOME}",
            "--stop-timeout", "1",
        ]  # fmt: skip
        if provider.options.get("read_only_root", True):
            args.append("--read-only")
        # the allowed names of every phase (an address of another phase's list is refused)
        for allowed in self.allowed.values():
            args += [arg for name, ip in allowed.names for arg in ("--add-host", f"{name}:{ip}")]
        # more host paths, at the same paths (as bwrap's options of these names)
        for mode, key in (("ro", "read_only"), ("rw", "read_write")):
            for path in provider.options.get(key) or ():
                host = os.path.abspath(str(path))
                args += ["--volume", f"{host}:{host}:{mode}"]
        for key in policy.env:  # the value from the client's environment (see client_env)
            args += ["--env", key]
        if limits.memory_bytes is not None:
            args += ["--memory", str(limits.memory_bytes)]
            args += ["--memory-swap", str(limits.memory_bytes)]
        if limits.processes is not None:
            args += ["--pids-limit", str(limits.processes)]
        if limits.cpu_seconds is not None:
            soft = max(1, round(limits.cpu_seconds))
            args += ["--ulimit", f"cpu={soft}:{soft + 1}"]
        if provider.options.get("cpus") is not None:
            args += ["--cpus", str(provider.options["cpus"])]
        args += provider.extra_run_args()
        return [*args, "--entrypoint", "sh", self.image, "-c", _KEEPER]

    async def start(self, provider: ContainerProvider) -> anyio.abc.Process:
        await anyio.to_thread.run_sync(self._hand_workspace_over)
        client = await anyio.open_process(
            [self.engine.binary, *self.run_args(provider)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=client_env(self.policy.env),
        )
        try:
            await self._wait_ready(client)
            shown = await self.engine.run("inspect", "--format", "{{.State.Pid}}", self.name)
            self.pid = int(shown.stdout.strip() or 0)
            self._groups = _cgroups(self.pid)
            await self._set_network(self.policy.network.mode)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.stop(client)
            raise
        return client

    async def _wait_ready(self, client: anyio.abc.Process) -> None:
        assert client.stdout is not None and client.stderr is not None
        seen = b""
        with anyio.move_on_after(START_TIMEOUT_S):
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                while not seen.endswith(_READY):
                    seen += await client.stdout.receive(64)
            if seen.endswith(_READY):
                return
            errors = b""
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                with anyio.move_on_after(5):
                    async for chunk in client.stderr:
                        errors += chunk
            lines = errors.decode("utf-8", "replace").strip().splitlines() or ["it exited"]
            raise SandboxError(
                f"sandbox {self.kind!r}: the container of image {self.image!r} did not "
                f"start: {lines[-1].strip()}"
            )
        raise SandboxError(
            f"sandbox {self.kind!r}: the container did not start in {START_TIMEOUT_S:g} s"
        )

    async def stop(self, client: anyio.abc.Process) -> None:
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        # the keeper ends at the end of its input, the container with it, and `run --rm`
        # returns once the container is removed: no second client to start
        if client.stdin is not None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await client.stdin.aclose()
        with anyio.move_on_after(STOP_TIMEOUT_S) as waited:
            await client.wait()
        if waited.cancelled_caught:
            with contextlib.suppress(ProcessLookupError):
                client.kill()
            await client.wait()
        if waited.cancelled_caught or client.returncode != 0:
            await self.engine.remove(self.name)
        await client.aclose()
        for process in self.processes:
            await process.aclose()
        await anyio.to_thread.run_sync(self._take_workspace_back)

    async def set_phase(self, phase: Phase) -> None:
        await super().set_phase(phase)
        await self._set_network(self.policy.network_for(phase).mode)

    async def _set_network(self, mode: NetworkMode) -> None:
        if mode == "allowlist" or self._relaying_allowed:
            await self._set_allowed(mode)
            return
        if mode == "model-only" and self.relay is None and self.endpoints:
            netns = f"/proc/{self.pid}/ns/net"
            self.relay = await anyio.to_thread.run_sync(Relay, netns, self.endpoints)
        elif mode != "model-only" and self.relay is not None:
            self.relay.close()
            self.relay = None

    async def _set_allowed(self, mode: NetworkMode) -> None:
        """The relay of an `allowlist` phase: its endpoints and destinations, each at its own
        address and port in the container's namespace (the address added to `lo`)."""
        if self.relay is not None:
            self.relay.close()
            self.relay = None
        self._relaying_allowed = False
        if mode != "allowlist":
            await self._set_network(mode)
            return
        allowed = self.allowed[self.phase]
        netns = f"/proc/{self.pid}/ns/net"
        await anyio.to_thread.run_sync(add_addresses, netns, allowed.addresses)
        pairs = list(dict.fromkeys([*self.endpoints, *allowed.pairs]))
        self.relay = await anyio.to_thread.run_sync(Relay, netns, pairs)
        self._relaying_allowed = True

    def bridged(self, endpoints: Sequence[str]) -> list[tuple[str, int]]:
        """The loopback addresses of `endpoints`, when a phase's network is `model-only`
        (`SandboxError` for one that is not on loopback)."""
        modes = {self.policy.network.mode, self.policy.grader_network.mode}
        bridging = modes & {"model-only", "allowlist"}
        return [endpoint_address(url) for url in endpoints] if bridging else []

    async def allow(self, endpoints: Sequence[str]) -> None:
        added = self.bridged(endpoints)
        self.endpoints += [pair for pair in dict.fromkeys(added) if pair not in self.endpoints]
        if self.relay is not None:
            await anyio.to_thread.run_sync(self.relay.add, self.endpoints)
        else:
            await self._set_network(self.policy.network_for(self.phase).mode)

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        stdin: bool = False,
    ) -> SandboxProcess:
        if not argv:
            raise SandboxError("sandbox: an empty command")
        mark = secrets.token_hex(8)
        args = ["exec", "--user", user or self.user, "--workdir", cwd or str(self.workspace)]
        if stdin:
            args.append("--interactive")
        variables = {**(env or {}), _EXEC_MARK: mark}
        for key in variables:
            args += ["--env", key]
        client = await anyio.open_process(
            [self.engine.binary, *args, self.name, *argv],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=client_env(variables),
        )
        process = ContainerProcess(client, self, mark)
        self.processes.append(process)
        return process

    def _wrote_on_host(self, path: Path) -> None:
        self._give(path)

    def _host_path(self, path: str) -> Path | None:
        # The workspace is bound at its own path: inside and out, the same file.
        full = PurePosixPath(path) if path.startswith("/") else self.workspace / path
        full = PurePosixPath(os.path.normpath(full))
        if full == self.workspace or self.workspace in full.parents:
            return within(Path(full), Path(self.workspace))
        return None

    # -- the workspace's owner: the container's user while the trial runs

    def _hand_workspace_over(self) -> None:
        uid, gid = _ids(self.user)
        info = self.root.stat()
        if uid is None or (info.st_uid, info.st_gid) == (uid, gid):
            return
        if os.geteuid() != 0:
            raise SandboxError(
                f"sandbox {self.kind!r}: the workspace belongs to uid {info.st_uid} and the "
                f"container's user is {self.user}; set the sandbox's user to "
                f"{info.st_uid}:{info.st_gid} (or run trialkit as root)"
            )
        self._owner = (info.st_uid, info.st_gid)
        _chown_tree(self.root, uid, gid or 0)

    def _take_workspace_back(self) -> None:
        if self._owner is not None and self.root.exists():
            _chown_tree(self.root, *self._owner)

    def _give(self, path: Path) -> None:
        uid, gid = _ids(self.user)
        if self._owner is not None and uid is not None:
            for part in [path, *path.parents]:
                if part == self.root.parent:
                    break
                os.lchown(part, uid, gid or 0)

    # -- limits, from the container's cgroups (read from the host, where they can be)

    def counters(self) -> dict[str, int]:
        memory, pids = self._groups.get("memory"), self._groups.get("pids")
        return {
            "oom_kill": _counter(memory, ("memory.oom_control", "memory.events"), "oom_kill"),
            "pids_max": _counter(pids, ("pids.events",), "max"),
        }

    def judge(self, before: dict[str, int], code: int) -> LimitName | None:
        after = self.counters()
        limits = self.policy.limits
        if limits.memory_bytes is not None and after["oom_kill"] > before["oom_kill"]:
            return "memory"
        if limits.processes is not None and after["pids_max"] > before["pids_max"]:
            return "processes"
        if limits.cpu_seconds is not None and code == -signal.SIGXCPU:
            return "cpu_time"
        return None

    def kill_marked(self, mark: str) -> None:
        """SIGKILL every process of the container whose environment carries `mark` (an exec's
        processes and what they started, `setsid` or not), where this process may see them."""
        procs = self._groups.get("pids") or self._groups.get("memory")
        if procs is None:
            return
        needle = f"{_EXEC_MARK}={mark}".encode()
        with contextlib.suppress(OSError):
            for line in (procs / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    environ = Path(f"/proc/{line}/environ").read_bytes()
                    if needle in environ.split(b"\0"):
                        os.kill(int(line), signal.SIGKILL)


def client_env(variables: Mapping[str, str]) -> dict[str, str]:
    """The environment of an engine client that passes `variables` on by name (`--env NAME`):
    their values never appear on a command line, which other users of the machine can read."""
    for key in variables:
        if not key or "=" in key:
            raise SandboxError(f"sandbox: environment variable name {key!r} is not valid")
    return {**os.environ, **variables}


def _default_user() -> str:
    uid = os.geteuid()
    return "1000:1000" if uid == 0 else f"{uid}:{os.getegid()}"


def _ids(user: str) -> tuple[int | None, int | None]:
    name, _, group = user.partition(":")
    if not name.isdigit():
        return None, None
    return int(name), int(group) if group.isdigit() else int(name)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for folder, dirs, files in os.walk(root):
        for entry in (*dirs, *files):
            with contextlib.suppress(FileNotFoundError):
                os.lchown(os.path.join(folder, entry), uid, gid)


def _cgroups(pid: int) -> dict[str, Path]:
    """The host folders of the cgroups of process `pid`, by controller (`memory`, `pids`)."""
    found: dict[str, Path] = {}
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            for name in ("memory", "pids"):
                found.setdefault(name, Path("/sys/fs/cgroup") / path.lstrip("/"))
            continue
        for name in controllers.split(","):
            if name in ("memory", "pids"):
                found[name] = Path("/sys/fs/cgroup") / name / path.lstrip("/")
    return {name: folder for name, folder in found.items() if folder.is_dir()}


def _counter(folder: Path | None, files: tuple[str, ...], key: str) -> int:
    if folder is None:
        return 0
    for name in files:
        with contextlib.suppress(OSError, ValueError):
            for line in (folder / name).read_text().splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    return int(value)
    return 0


def _recorded(policy: SandboxPolicy) -> dict[str, float | int]:
    limits = policy.limits
    values = {
        "memory_bytes": limits.memory_bytes,
        "processes": limits.processes,
        "cpu_seconds": limits.cpu_seconds,
        "wall_clock_seconds": limits.wall_clock_seconds,
        "output_bytes": limits.output_bytes,
    }
    return {name: value for name, value in values.items() if value is not None}
