"""The `bwrap` provider: each process in a bubblewrap sandbox (Debian's `bubblewrap`).

What a process sees: the host's `/usr` read-only (and `/bin`, `/lib`, `/lib64`, `/sbin` as the
host has them), the files of `/etc` named in `ETC_ALLOWED` read-only (never `shadow`,
`gshadow`, `sudoers`, SSH keys, `pip.conf`, `npmrc`, `/etc/environment` or any other file not
named there), the workspace read-write at its own path, a `/tmp` and a HOME of the trial's own
(kept from one process to the next of the same trial, removed at its end), its own `/proc` and
a minimal `/dev`; and only the environment variables the policy and the call pass. It runs in
new user, pid, network, ipc and uts namespaces, with no capabilities, in a session of its own,
and dies with trialkit (`--die-with-parent`). When a command ends, its pid namespace ends with
it: a child that called `setsid` or double-forked is killed by the kernel.

Network: `none` is a namespace with only its own loopback; `model-only` adds, on that
loopback, listeners at the ports of the trial's endpoints (its model proxy, its MCP servers),
relayed to the same ports of this machine's loopback (`_bridge`: needs root); `allowlist`
adds the policy's `allow` destinations, resolved at the trial's start, each at its own address
and port inside, relayed to it, and their names in a generated `/etc/hosts` (`_allow`: needs
root); `host` shares
the host's network and is allowed only when the provider is made with `allow_host=True`.

Limits: memory and processes through a cgroup per trial (v1 or v2, where one can be
written: `_cgroup`), CPU time per process (RLIMIT_CPU), the size of one file (RLIMIT_FSIZE)
and, after each command, the bytes of the workspace, HOME and /tmp together (disk), the wall
clock and output of `exec`.

Options: `executable` (default: `bwrap` on PATH), `read_only` and `read_write` (more host
paths, bound at their own path: a virtual environment an agent runs from), `home` (HOME's path
inside, default `/home/sandbox`), `allow_host`, `starts` and `alive` (`_ramp`: sandboxes
starting, and alive, at once; no bound on those alive by default).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import anyio.to_thread

from trialkit.sandbox import _process
from trialkit.sandbox._allow import Allowed, add_addresses, allowed_for, check_allow, hosts_text
from trialkit.sandbox._bridge import Bridge, can_enter, loopback_endpoints
from trialkit.sandbox._bwrap_util import (
    alive,
    bytes_under,
    check_options,
    ids,
    read_info,
    set_rlimits,
)
from trialkit.sandbox._cgroup import Cgroups, Group
from trialkit.sandbox._etc import ETC_ALLOWED, staged_etc
from trialkit.sandbox._ramp import AliveGate, StartGate, alive_bound, start_bound
from trialkit.sandbox._reaper import REAPER
from trialkit.sandbox._relay import Relay
from trialkit.sandbox.base import (
    Capabilities,
    LimitName,
    NetworkMode,
    NetworkPolicy,
    Phase,
    Sandbox,
    SandboxError,
    SandboxInfo,
    SandboxPolicy,
    SandboxProcess,
    SandboxProvider,
    within,
)

__all__ = ["ETC_ALLOWED", "BwrapProvider", "BwrapSandbox"]

PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
STATE_PREFIX = "trialkit-sandbox-"
"""A trial's /tmp and HOME on the host: `<tempdir>/trialkit-sandbox-<pid of trialkit>-*`."""
_TOP_LINKS = ("bin", "lib", "lib64", "lib32", "libx32", "sbin")
_SIGXCPU = int(signal.SIGXCPU)
_SIGXFSZ = int(signal.SIGXFSZ)


class BwrapProvider(SandboxProvider):
    name = "bwrap"
    install_hint = "apt-get install bubblewrap (Debian, Ubuntu) or dnf install bubblewrap"
    host_paths_option = "read_only"

    def __init__(self, **options: Any) -> None:
        check_options(options)
        super().__init__(**options)
        self.gate = StartGate(start_bound("bwrap", options.get("starts")))
        # no bound by default: a trial's sandbox costs a folder until its commands run, and
        # those are bounded by the run's concurrency and the start gate
        self.living = AliveGate(alive_bound("bwrap", options.get("alive")))

    @cached_property
    def executable(self) -> str | None:
        chosen = self.options.get("executable")
        return str(chosen) if chosen else shutil.which("bwrap")

    @cached_property
    def cgroups(self) -> Cgroups:
        return Cgroups.probe()

    @cached_property
    def _why_not(self) -> str | None:
        if self.executable is None:
            return f"sandbox 'bwrap' needs bubblewrap, not installed here: {self.install_hint}"
        try:
            done = subprocess.run(
                [self.executable, "--unshare-all", "--ro-bind", "/", "/", "--", "true"],
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"sandbox 'bwrap': {self.executable} does not run: {exc}"
        if done.returncode != 0:
            error = done.stderr.decode(errors="replace").strip().splitlines()
            reason = error[-1] if error else f"exit {done.returncode}"
            return (
                f"sandbox 'bwrap' cannot make namespaces here ({reason}); user namespaces may "
                f"be off (sysctl kernel.unprivileged_userns_clone=1)"
            )
        return None

    def unavailable(self) -> str | None:
        return self._why_not

    def capabilities(self) -> Capabilities:
        network: set[NetworkMode] = {"none"}
        if can_enter() is None:
            network |= {"model-only", "allowlist"}
        if self.options.get("allow_host"):
            network.add("host")
        limits: set[LimitName] = {"wall_clock", "output", "cpu_time", "disk"}
        limits |= self.cgroups.limits
        cgroup = (
            f"cgroup v{self.cgroups.version}: memory and processes per trial"
            if self.cgroups.version
            else f"no cgroup ({self.cgroups.why_not}): no memory or process limit"
        )
        return Capabilities(
            isolation=True,
            network=frozenset(network),
            limits=frozenset(limits),
            users=True,
            notes=(
                "host /usr read-only, an /etc allowlist, the workspace read-write, private "
                "/tmp and HOME; new user, pid, net, ipc and uts namespaces",
                cgroup,
                "CPU time per process (RLIMIT_CPU); disk: one file (RLIMIT_FSIZE), and the "
                "workspace, HOME and /tmp together after each command",
                "each command's processes end with it (no background process between commands)",
            ),
        )

    async def cleanup(self) -> int:
        """Remove the cgroups and the /tmp and HOME folders of trialkit processes that are
        gone (killed before they could remove them); their sandboxes died with them."""
        return await anyio.to_thread.run_sync(self._cleanup)

    def _cleanup(self) -> int:
        removed = self.cgroups.remove_orphans()
        for folder in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*"):
            pid = folder.name.removeprefix(STATE_PREFIX).split("-", 1)[0]
            if pid.isdigit() and not alive(int(pid)) and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed

    def check(self, policy: SandboxPolicy) -> None:
        super().check(policy)
        check_allow(policy)

    def default_policy(self) -> SandboxPolicy:
        agent: NetworkMode = "model-only" if can_enter() is None else "none"
        return SandboxPolicy(provider="bwrap", network=NetworkPolicy(agent))

    def sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str] = ()
    ) -> AbstractAsyncContextManager[Sandbox]:
        return self._sandbox(workspace, policy, endpoints)

    @asynccontextmanager
    async def _sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str]
    ) -> AsyncIterator[Sandbox]:
        if self.executable is None:
            raise SandboxError(str(self._why_not))
        bridged = loopback_endpoints(endpoints)
        allowed = await anyio.to_thread.run_sync(allowed_for, policy)  # names resolved outside
        async with self.living.alive():  # past the bound, wait for a trial's sandbox to end
            sandbox = self._make(workspace, policy, bridged)
            sandbox.allowed = allowed
            state = sandbox.state
            try:
                yield sandbox
            finally:
                with anyio.CancelScope(shield=True):
                    await sandbox.stop()
                    REAPER.remove(state, sandbox.group)

    def _make(
        self, workspace: Path, policy: SandboxPolicy, bridged: list[tuple[str, int]]
    ) -> BwrapSandbox:
        state = Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-"))
        return BwrapSandbox(self, Path(os.path.realpath(workspace)), policy, state, bridged)


class BwrapSandbox(Sandbox):
    provider = "bwrap"

    def __init__(
        self,
        owner: BwrapProvider,
        workspace: Path,
        policy: SandboxPolicy,
        state: Path,
        endpoints: list[tuple[str, int]],
    ) -> None:
        super().__init__(PurePosixPath(workspace), policy)
        self.owner = owner
        self.host_workspace = workspace
        self.state = state
        self.endpoints = endpoints
        self.home = PurePosixPath(str(owner.options.get("home") or "/home/sandbox"))
        (state / "home").mkdir()
        (state / "tmp").mkdir(mode=0o1777)
        self.running: set[_process.HostProcess] = set()
        self.group: Group | None = None
        self.allowed: dict[Phase, Allowed] = {}
        """Each `allowlist` phase's destinations, resolved at the trial's start."""

    @property
    def info(self) -> SandboxInfo:
        limits = self.policy.limits
        recorded = {
            key: value
            for key, value in vars(limits).items()
            if isinstance(value, int | float) and value is not None
        }
        cgroups = self.owner.cgroups
        return SandboxInfo(
            provider="bwrap",
            isolated=True,
            network=self.policy.network.mode,
            grader_network=self.policy.grader_network.mode,
            limits=recorded,
            details={"cgroup": f"v{cgroups.version}" if cgroups.version else "none"},
        )

    async def stop(self) -> None:
        for process in list(self.running):
            with contextlib.suppress(Exception):
                await process.aclose()
        self.running.clear()

    def _argv(
        self, argv: Sequence[str], cwd: str, user: str | None, info: int, block: int
    ) -> list[str]:
        network = self.policy.network_for(self.phase).mode
        command = [str(self.owner.executable)]
        command += ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        command += ["--unshare-cgroup-try"]
        if network != "host":
            command.append("--unshare-net")
        command += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        command += ["--hostname", "sandbox"]
        uid, gid = ids(user if user is not None else self.policy.user)
        if uid is not None:
            command += ["--uid", str(uid), "--gid", str(gid)]
        command += ["--ro-bind", "/usr", "/usr"]
        for name in _TOP_LINKS:
            top = Path("/") / name
            if top.is_symlink():
                command += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                command += ["--ro-bind", str(top), str(top)]
        command += ["--proc", "/proc", "--dev", "/dev"]
        command += ["--bind", str(self.state / "tmp"), "/tmp"]
        etc = staged_etc(STATE_PREFIX)
        command += ["--ro-bind", str(etc), "/etc"]
        if network == "allowlist":
            command += ["--ro-bind", str(self._hosts(etc)), "/etc/hosts"]
        for extra in self.owner.options.get("read_only") or ():
            command += ["--ro-bind-try", str(extra), str(extra)]
        command += ["--bind", str(self.state / "home"), str(self.home)]
        command += ["--bind", str(self.host_workspace), str(self.host_workspace)]
        for extra in self.owner.options.get("read_write") or ():
            command += ["--bind-try", str(extra), str(extra)]
        command += ["--chdir", cwd, "--info-fd", str(info), "--block-fd", str(block), "--"]
        return command + list(argv)

    def _hosts(self, etc: Path) -> Path:
        """The phase's /etc/hosts: the host's, and the allowed names."""
        hosts = self.state / f"hosts-{self.phase}"
        if not hosts.exists():
            base = (etc / "hosts").read_text() if (etc / "hosts").is_file() else ""
            hosts.write_text(hosts_text(base, [self.allowed[self.phase]]))
        return hosts

    async def allow(self, endpoints: Sequence[str]) -> None:
        for pair in loopback_endpoints(endpoints):
            if pair not in self.endpoints:
                self.endpoints.append(pair)

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        stdin: bool = False,
    ) -> SandboxProcess:
        async with self.owner.gate.start():  # a burst of commands starts a few at a time
            return await self._open_process(argv, cwd=cwd, env=env, user=user, stdin=stdin)

    async def _open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        stdin: bool = False,
    ) -> SandboxProcess:
        if not argv:
            raise SandboxError("sandbox exec: an empty command")
        network = self.policy.network_for(self.phase)
        if network.mode == "host" and not self.owner.options.get("allow_host"):
            raise SandboxError("sandbox 'bwrap' was not made with allow_host: no host network")
        if network.mode == "allowlist" and can_enter() is not None:
            raise SandboxError(f"sandbox 'bwrap': network 'allowlist': {can_enter()}")
        # bwrap passes its own environment on: the variables are never in its command line
        environment = {"PATH": PATH, "HOME": str(self.home), "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        environment |= {**self.policy.env, **(env or {})}
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        try:
            command = self._argv(argv, cwd or str(self.workspace), user, info_w, block_r)
            process = await _process.start(
                command, cwd="/", env=environment, stdin=stdin, pass_fds=(info_w, block_r)
            )
        except BaseException:
            for fd in (info_r, info_w, block_r, block_w):
                os.close(fd)
            raise
        os.close(info_w)
        os.close(block_r)
        try:
            return await self._started(process, info_r, block_w, network.mode)
        except BaseException:
            # before block_w closes: bwrap would take its end for the go-ahead and run the
            # command without its limits and bridge (a cancellation while it was set up)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with anyio.CancelScope(shield=True):
                await process.aclose()
            raise
        finally:
            os.close(info_r)
            with contextlib.suppress(OSError):
                os.close(block_w)

    async def _started(
        self, process: anyio.abc.Process, info_r: int, block_w: int, network: NetworkMode
    ) -> SandboxProcess:
        text = await anyio.to_thread.run_sync(read_info, info_r)
        try:
            child = int(json.loads(text)["child-pid"])
        except (ValueError, KeyError, TypeError):
            await process.wait()
            error = b""
            if process.stderr is not None:
                with contextlib.suppress(Exception):
                    error = await process.stderr.receive(65536)
            line = error.decode(errors="replace").strip() or f"exit {process.returncode}"
            raise SandboxError(f"bwrap could not start the sandbox: {line}") from None
        limits = self.policy.limits
        bridge = Bridge(self.endpoints if network in ("model-only", "allowlist") else ())
        try:
            group = self._group()
            since = (0, 0)
            if group is not None:
                since = group.events()
                group.add(child)
            set_rlimits(child, limits.cpu_seconds, limits.disk_bytes)
            bridge.open(child)
            if network == "allowlist":
                self._open_allowed(child, bridge)
            os.write(block_w, b"1")
        except BaseException:
            bridge.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            raise
        handle = _process.HostProcess(process, on_exit=_Judge(self, group, since, bridge))
        self.running.add(handle)  # its pipes are closed at the trial's end at the latest
        return handle

    def _open_allowed(self, child: int, bridge: Bridge) -> None:
        """The phase's allowed destinations inside the command's namespace, relayed out
        (closed with `bridge`)."""
        allowed = self.allowed[self.phase]
        netns = f"/proc/{child}/ns/net"
        add_addresses(netns, allowed.addresses)
        pairs = [pair for pair in allowed.pairs if pair not in bridge.endpoints]
        if pairs:
            bridge.relays.append(Relay(netns, pairs))

    def _group(self) -> Group | None:
        """The trial's cgroup, made at its first command when its limits need one."""
        limits = self.policy.limits
        if self.group is None and (limits.memory_bytes or limits.processes):
            self.group = self.owner.cgroups.group(cpu=limits.cpu_seconds is not None)
            if self.group is None:
                raise SandboxError("sandbox 'bwrap': cannot make a cgroup for its limits")
            # +1: each command's init (bwrap) is in the group too
            processes = None if limits.processes is None else limits.processes + 1
            self.group.set_limits(limits.memory_bytes, processes)
        return self.group

    # -- files, straight from the host where the path stays in a folder the trial owns --------

    def _host_path(self, path: str) -> Path | None:
        inside = PurePosixPath(path if path.startswith("/") else f"{self.workspace}/{path}")
        roots = [
            (self.workspace, self.host_workspace),
            (self.home, self.state / "home"),
            (PurePosixPath("/tmp"), self.state / "tmp"),
        ]
        for mount, host in roots:
            if inside == mount or mount in inside.parents:
                return within(host / inside.relative_to(mount), host)
        return None

    async def copy_in(self, source: Path, target: str) -> None:
        host = self._host_path(target)
        if host is None:
            await super().copy_in(source, target)
            return
        await anyio.to_thread.run_sync(
            lambda: shutil.copytree(source, host, symlinks=True, dirs_exist_ok=True)
        )

    async def copy_out(self, source: str, target: Path) -> None:
        host = self._host_path(source)
        if host is None:
            await super().copy_out(source, target)
            return
        await anyio.to_thread.run_sync(
            lambda: shutil.copytree(host, target, symlinks=True, dirs_exist_ok=True)
        )

    def disk_used(self) -> int:
        return bytes_under(self.host_workspace) + bytes_under(self.state)


class _Judge:
    """Which limit ended a command, once it ended; and its cgroup and bridge gone."""

    def __init__(
        self, sandbox: BwrapSandbox, group: Group | None, since: tuple[int, int], bridge: Bridge
    ) -> None:
        self.sandbox = sandbox
        self.group = group
        self.since = since
        self.bridge = bridge

    def __call__(self, code: int) -> LimitName | None:
        limits = self.sandbox.policy.limits
        self.bridge.close()
        hit: LimitName | None = None
        cpu: float | None = None
        if self.group is not None:
            hit = self.group.hit(self.since)
            cpu = self.group.cpu_seconds()
        if hit is not None:
            return hit
        if limits.cpu_seconds is not None and (
            code in (128 + _SIGXCPU, -_SIGXCPU) or (cpu is not None and cpu >= limits.cpu_seconds)
        ):
            return "cpu_time"
        if limits.disk_bytes is not None and (
            code in (128 + _SIGXFSZ, -_SIGXFSZ) or self.sandbox.disk_used() > limits.disk_bytes
        ):
            return "disk"
        return None
