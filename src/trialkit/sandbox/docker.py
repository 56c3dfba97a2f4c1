"""The `docker` and `podman` providers: one container per trial, from an image the suite names
or a Dockerfile it ships (built once per suite, `trialkit-sandbox:<hash of its context>`).

A trial's container runs the image with `--network none` (`host` only when a suite asks for the
host's network in every phase), a read-only root with private `/tmp` and `HOME` (tmpfs), the
workspace bind-mounted read-write at its own path, as a non-root user (the host's user, or
`1000:1000` when trialkit runs as root: the workspace is handed to that user for the trial and
back afterwards), no new privileges, and the limits as the engine's own flags: `--memory`
(swap included), `--pids-limit`, `--ulimit cpu`, `--cpus` (option `cpus`); the wall clock and the
output caps are trialkit's, around each `exec`. `model-only`: trialkit's endpoints (its model
proxy, its MCP servers) are reached inside at the same loopback URLs through `_relay`.

Every container carries the labels `org.trialkit.sandbox`, `org.trialkit.run` and
`org.trialkit.owner` (`host:pid`). Its first process reads trialkit's pipe and ends when that
closes, so a killed run's containers end with it (`--rm` removes them); `trialkit sandbox
cleanup` removes any a killed run left all the same (a daemon that was down, a stuck client).

Podman is the same code with the `podman` command, `--runtime runc` by default (crun rejects
some cgroup v1 layouts) and explicit `nofile`/`nproc` ulimits (its defaults may exceed what
runc may set in a container).
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import anyio
import anyio.abc

from trialkit.sandbox._engine import LABEL, LABEL_OWNER, LABEL_RUN, Engine
from trialkit.sandbox._relay import Relay, endpoint_address, why_no_relay
from trialkit.sandbox.base import (
    Capabilities,
    LimitName,
    NetworkMode,
    Phase,
    PolicyRefused,
    Sandbox,
    SandboxError,
    SandboxInfo,
    SandboxPolicy,
    SandboxProcess,
    SandboxProvider,
)

__all__ = ["ContainerSandbox", "DockerProvider", "PodmanProvider"]

HOME = "/home/trialkit"
START_TIMEOUT_S = 120.0
_READY = b"trialkit-ready\n"
_KEEPER = "echo trialkit-ready; exec cat >/dev/null"
_EXEC_MARK = "TRIALKIT_EXEC"
_INITS = (
    "/usr/libexec/podman/catatonit",
    "/usr/bin/catatonit",
    "/usr/bin/tini-static",
    "/usr/bin/tini",
    "/usr/sbin/docker-init",
    "/usr/bin/docker-init",
)


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
        return self._code

    async def kill(self) -> None:
        self._box.kill_marked(self._mark)
        if self.client.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.client.send_signal(signal.SIGKILL)

    def limit(self) -> LimitName | None:
        return self._limit


class ContainerSandbox(Sandbox):
    """One trial's container (see the module's docstring)."""

    def __init__(
        self, provider: DockerProvider, workspace: Path, policy: SandboxPolicy, image: str
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

    def run_args(self, provider: DockerProvider) -> list[str]:
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
        if provider.options.get("read_only", True):
            args.append("--read-only")
        for key, value in policy.env.items():
            args += ["--env", f"{key}={value}"]
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

    async def start(self, provider: DockerProvider) -> anyio.abc.Process:
        await anyio.to_thread.run_sync(self._hand_workspace_over)
        client = await anyio.open_process(
            [self.engine.binary, *self.run_args(provider)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
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
        await self.engine.run("rm", "--force", self.name, check=False)
        if client.stdin is not None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await client.stdin.aclose()
        with anyio.move_on_after(10) as waited:
            await client.wait()
        if waited.cancelled_caught:
            with contextlib.suppress(ProcessLookupError):
                client.kill()
            await client.wait()
        await anyio.to_thread.run_sync(self._take_workspace_back)

    async def set_phase(self, phase: Phase) -> None:
        await super().set_phase(phase)
        await self._set_network(self.policy.network_for(phase).mode)

    async def _set_network(self, mode: NetworkMode) -> None:
        if mode == "model-only" and self.relay is None and self.endpoints:
            netns = f"/proc/{self.pid}/ns/net"
            self.relay = await anyio.to_thread.run_sync(Relay, netns, self.endpoints)
        elif mode != "model-only" and self.relay is not None:
            self.relay.close()
            self.relay = None

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
        for key, value in {**(env or {}), _EXEC_MARK: mark}.items():
            args += ["--env", f"{key}={value}"]
        client = await anyio.open_process(
            [self.engine.binary, *args, self.name, *argv],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        return ContainerProcess(client, self, mark)

    async def read_file(self, path: str) -> bytes:
        inside = self._in_workspace(path)
        if inside is None:
            return await super().read_file(path)
        return await anyio.Path(inside).read_bytes()

    async def write_file(self, path: str, data: bytes | str) -> None:
        inside = self._in_workspace(path)
        if inside is None:
            await super().write_file(path, data)
            return
        target = anyio.Path(inside)
        await target.parent.mkdir(parents=True, exist_ok=True)
        await target.write_bytes(data.encode() if isinstance(data, str) else data)
        await anyio.to_thread.run_sync(self._give, inside)

    def _in_workspace(self, path: str) -> Path | None:
        full = PurePosixPath(path) if path.startswith("/") else self.workspace / path
        full = PurePosixPath(os.path.normpath(full))
        if full == self.workspace or self.workspace in full.parents:
            return Path(full)
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


class DockerProvider(SandboxProvider):
    """One container per trial (see the module's docstring). Options: `user`, `cpus`,
    `read_only` (default true), `run_id` (the label's value; a new id by default)."""

    name: ClassVar[str] = "docker"
    binary: ClassVar[str] = "docker"
    install_hint: ClassVar[str] = "apt-get install docker.io (and start dockerd)"
    tmpfs_owner: ClassVar[bool] = True
    """The engine takes `uid=`/`gid=` options for a tmpfs (podman does not)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.engine = Engine(self.binary, runtime=self.default_runtime())
        self.run_id = str(options.get("run_id") or uuid.uuid4().hex)
        self._images: dict[tuple[str | None, str | None], str] = {}
        self._why_not: str | bool | None = False
        self._lock = anyio.Lock()

    def default_runtime(self) -> str | None:
        return self.options.get("runtime")

    def extra_run_args(self) -> list[str]:
        return []

    def init_args(self) -> list[str]:
        """A first process that reaps orphans (the engine's own)."""
        return ["--init"]

    def capabilities(self) -> Capabilities:
        network: set[NetworkMode] = {"none", "host"}
        relay = why_no_relay()
        if relay is None:
            network.add("model-only")
        return Capabilities(
            isolation=True,
            network=frozenset(network),
            limits=frozenset({"memory", "processes", "cpu_time", "wall_clock", "output"}),
            users=True,
            images=True,
            persistent_processes=True,
            notes=(
                f"a container per trial ({self.binary}), read-only root, private /tmp and HOME",
                "network none; model-only through listeners made in the container's namespace"
                + (f" (not here: {relay})" if relay else ""),
                "memory, processes, CPU time: --memory, --pids-limit, --ulimit cpu",
                "disk: not bounded (the workspace is the host's folder)",
            ),
        )

    def unavailable(self) -> str | None:
        if self._why_not is False:
            self._why_not = self.engine.unavailable()
        return self._why_not if isinstance(self._why_not, str) else None

    def check(self, policy: SandboxPolicy) -> None:
        super().check(policy)
        if policy.image is None and policy.dockerfile is None:
            raise PolicyRefused(
                f"sandbox {self.name!r} needs an image: sandbox: {{provider: {self.name}, "
                f"image: NAME}} or {{provider: {self.name}, dockerfile: PATH}}"
            )
        modes = {policy.network.mode, policy.grader_network.mode}
        if "host" in modes and len(modes) > 1:
            raise PolicyRefused(
                f"sandbox {self.name!r} cannot change between the host's network and "
                f"{' / '.join(sorted(modes - {'host'}))} within a trial; ask for one network"
            )

    async def setup(self, policy: SandboxPolicy) -> None:
        await self.image_for(policy)

    async def image_for(self, policy: SandboxPolicy) -> str:
        """The image of `policy`, built or pulled once per provider."""
        key = (policy.image, str(policy.dockerfile) if policy.dockerfile else None)
        async with self._lock:
            if key not in self._images:
                why = self.unavailable()
                if why is not None:
                    raise SandboxError(why)
                if policy.dockerfile is not None:
                    self._images[key] = await self.engine.build(Path(policy.dockerfile))
                elif policy.image is not None:
                    await self.engine.ensure_image(policy.image, named_in="the suite's image")
                    self._images[key] = policy.image
                else:
                    raise PolicyRefused(f"sandbox {self.name!r} needs an image or a dockerfile")
            return self._images[key]

    def sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str] = ()
    ) -> AbstractAsyncContextManager[Sandbox]:
        return self._sandbox(workspace, policy, endpoints)

    @asynccontextmanager
    async def _sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str]
    ) -> AsyncIterator[Sandbox]:
        image = await self.image_for(policy)
        root = Path(await anyio.Path(workspace).resolve())
        box = ContainerSandbox(self, root, policy, image)
        if "model-only" in {policy.network.mode, policy.grader_network.mode}:
            box.endpoints = [endpoint_address(url) for url in endpoints]
        client = await box.start(self)
        try:
            yield box
        finally:
            with anyio.CancelScope(shield=True):
                await box.stop(client)

    async def cleanup(self) -> int:
        if self.unavailable() is not None:
            return 0
        return len(await self.engine.cleanup(everything=bool(self.options.get("everything"))))


class PodmanProvider(DockerProvider):
    """The same, with `podman` (`--runtime runc` unless the `runtime` option says otherwise)."""

    name: ClassVar[str] = "podman"
    binary: ClassVar[str] = "podman"
    install_hint: ClassVar[str] = "apt-get install podman runc"
    tmpfs_owner: ClassVar[bool] = False

    def default_runtime(self) -> str | None:
        return str(self.options.get("runtime") or "runc")

    def init_args(self) -> list[str]:
        # podman's --init wants catatonit; Debian's docker.io ships tini as docker-init
        for path in _INITS:
            if os.access(path, os.X_OK):
                return ["--init"] if "catatonit" in path else ["--init", "--init-path", path]
        return []

    def extra_run_args(self) -> list[str]:
        files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        nproc = int(self.options.get("nproc", 4096))
        return ["--ulimit", f"nofile={files}:{files}", "--ulimit", f"nproc={nproc}:{nproc}"]


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
