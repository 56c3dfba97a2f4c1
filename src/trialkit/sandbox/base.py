"""The sandbox interface (DESIGN §9): where an agent's processes run and what they can reach.

A `SandboxProvider` is found by name (`trialkit.sandbox.registry`). It declares what it can
enforce (`Capabilities`); `refusal(capabilities, policy)` says, in one line, why a policy asks
for more, and a run is then refused before any trial. Per suite, `await provider.setup(policy)`
does the work done once (an image build) and `await provider.teardown()` undoes it. Per trial,
`async with provider.sandbox(workspace, policy, endpoints) as sandbox:` starts the trial's
sandbox and stops it at the end, with every process it started: nothing outlives the block.

Inside, `await sandbox.exec(argv, ...)` runs a command to its end with its output capped and
returns an `ExecResult`; `await sandbox.open_process(argv, ...)` starts one whose pipes the
caller reads (a command-line agent, an MCP server). Files: `read_file`, `write_file`,
`copy_in`, `copy_out`. A limit that ended a process is named by `ExecResult.limit` (or
`SandboxProcess.limit()`), and `ExecResult.raise_for_limit()` turns it into `LimitExceeded`,
which a trial records as an error naming the limit: never a pass or a fail.

The network follows the phase: `policy.network` while the agent runs, `policy.grader_network`
once `await sandbox.set_phase("grader")` was called (a verifier's tests).
"""

from __future__ import annotations

import io
import math
import os
import shlex
import tarfile
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Literal, get_args

import anyio
import anyio.abc

from trialkit.sandbox._exec import run_to_end

__all__ = [
    "DEFAULT_OUTPUT_BYTES",
    "LIMIT_NAMES",
    "NETWORK_MODES",
    "Capabilities",
    "ExecResult",
    "LimitExceeded",
    "LimitName",
    "Limits",
    "NetworkMode",
    "NetworkPolicy",
    "Phase",
    "PolicyRefused",
    "Sandbox",
    "SandboxError",
    "SandboxInfo",
    "SandboxPolicy",
    "SandboxProcess",
    "SandboxProvider",
    "SandboxUnavailable",
    "refusal",
]

NetworkMode = Literal["none", "model-only", "allowlist", "host"]
"""`none`: no network at all (a loopback of its own); `model-only`: only the endpoints trialkit
gives the trial (its model proxy, its MCP servers), at the URLs the agent is given; `allowlist`:
those endpoints and the `allow` entries of the policy; `host`: the host's network, unconfined."""
NETWORK_MODES: tuple[NetworkMode, ...] = get_args(NetworkMode)

LimitName = Literal["memory", "processes", "cpu_time", "wall_clock", "output", "disk"]
"""The limits a sandbox can enforce, by the name a trial's error gives the one that was hit."""
LIMIT_NAMES: tuple[LimitName, ...] = get_args(LimitName)

Phase = Literal["agent", "grader"]

DEFAULT_OUTPUT_BYTES = 10_000_000
"""Output kept per stream of an `exec` when the policy's limits set none."""


class SandboxError(Exception):
    """The sandbox could not do what was asked (one line for the user)."""


class SandboxUnavailable(SandboxError):
    """The provider cannot run on this machine; the message says how to install what it needs
    (a run asking for it stops: it never falls back to `local`)."""


class PolicyRefused(SandboxError):
    """The provider cannot enforce the policy; the message is `refusal(...)`'s line."""


class LimitExceeded(SandboxError):
    """A limit ended a process of the sandbox: a trial error naming the limit."""

    def __init__(self, limit: LimitName, message: str, result: ExecResult | None = None) -> None:
        super().__init__(message)
        self.limit: LimitName = limit
        self.result = result


@dataclass(frozen=True)
class NetworkPolicy:
    """What the processes of one phase of a trial can reach."""

    mode: NetworkMode = "none"
    allow: tuple[str, ...] = ()
    """For `allowlist`: `host:port` or URL entries reachable besides the endpoints (a port is
    needed: `_allow.destinations`)."""

    def __post_init__(self) -> None:
        if self.mode not in NETWORK_MODES:
            raise ValueError(f"network: one of {', '.join(NETWORK_MODES)}, got {self.mode!r}")
        if self.allow and self.mode != "allowlist":
            raise ValueError(f"network: allow is for mode allowlist, not {self.mode!r}")


@dataclass(frozen=True)
class Limits:
    """Bounds on what one trial's sandbox may use; `None` is no bound."""

    memory_bytes: int | None = None
    """Resident memory of all the sandbox's processes together."""
    processes: int | None = None
    """Processes (and threads) alive at once in the sandbox."""
    cpu_seconds: float | None = None
    """CPU time of one process (providers with cgroups: of all of an exec's processes)."""
    wall_clock_seconds: float | None = None
    """Wall-clock time of one `exec` or process (the trial's own timeout bounds the whole)."""
    output_bytes: int | None = DEFAULT_OUTPUT_BYTES
    """Bytes of stdout and of stderr kept per `exec`; a process that prints more is stopped."""
    disk_bytes: int | None = None
    """Bytes the sandbox may write: the workspace, HOME and /tmp together."""

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "processes", "output_bytes", "disk_bytes"):
            value = getattr(self, name)
            whole = isinstance(value, int) and not isinstance(value, bool)
            if value is not None and (not whole or value <= 0):
                raise ValueError(f"limits: {name} must be a whole number > 0, got {value!r}")
        for name in ("cpu_seconds", "wall_clock_seconds"):
            value = getattr(self, name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if value is not None and not (number and 0 < value < math.inf):
                raise ValueError(f"limits: {name} must be a number of seconds > 0, got {value!r}")

    def asked(self) -> frozenset[LimitName]:
        """The limits this sets, by name."""
        names: dict[str, LimitName] = {
            "memory_bytes": "memory",
            "processes": "processes",
            "cpu_seconds": "cpu_time",
            "wall_clock_seconds": "wall_clock",
            "output_bytes": "output",
            "disk_bytes": "disk",
        }
        return frozenset(limit for key, limit in names.items() if getattr(self, key) is not None)


@dataclass(frozen=True)
class SandboxPolicy:
    """What a suite or task asks of its sandbox (the suite file's `sandbox:` key)."""

    provider: str = "local"
    network: NetworkPolicy = field(default_factory=lambda: NetworkPolicy("model-only"))
    """While the agent runs."""
    grader_network: NetworkPolicy = field(default_factory=lambda: NetworkPolicy("none"))
    """While graders run commands in the sandbox (after `set_phase("grader")`)."""
    limits: Limits = field(default_factory=Limits)
    image: str | None = None
    """An image to run in (providers declaring `images`)."""
    dockerfile: Path | None = None
    """A Dockerfile to build once per suite (providers declaring `images`)."""
    user: str | None = None
    """The user processes run as by default (providers declaring `users`)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables every process of the sandbox gets (nothing else of the host's)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Provider-specific settings, passed through to the provider."""

    def network_for(self, phase: Phase) -> NetworkPolicy:
        return self.network if phase == "agent" else self.grader_network

    def with_provider(self, provider: str) -> SandboxPolicy:
        return replace(self, provider=provider)


@dataclass(frozen=True)
class Capabilities:
    """What a provider can enforce; a policy asking for more is refused before any trial."""

    isolation: bool
    """Files outside the workspace are hidden or read-only, host processes and environment
    variables are invisible, and no process outlives the trial."""
    network: frozenset[NetworkMode]
    """The network modes it enforces."""
    limits: frozenset[LimitName]
    """The limits it enforces."""
    users: bool = False
    """`exec(user=...)` and `policy.user` run processes as another user."""
    images: bool = False
    """It runs in an image (`policy.image`, `policy.dockerfile`) rather than the host's files."""
    persistent_processes: bool = False
    """A process started in the background by one `exec` outlives that exec, until the trial
    ends (else each exec's processes all end with it)."""
    notes: tuple[str, ...] = ()
    """How it enforces each thing, for `trialkit sandbox check` and the docs."""


def refusal(provider: str, capabilities: Capabilities, policy: SandboxPolicy) -> str | None:
    """Why `provider` cannot enforce `policy` (one line), or `None` when it can."""
    missing: list[str] = []
    for phase, network in (("agent", policy.network), ("grader", policy.grader_network)):
        if network.mode not in capabilities.network:
            missing.append(f"network {network.mode!r} ({phase})")
    missing += [f"limit {name!r}" for name in sorted(policy.limits.asked() - capabilities.limits)]
    if (policy.image or policy.dockerfile) and not capabilities.images:
        missing.append("images")
    if policy.user is not None and not capabilities.users:
        missing.append("user")
    if not missing:
        return None
    enforced = ", ".join(sorted(capabilities.network)) or "none"
    return (
        f"sandbox {provider!r} cannot enforce {', '.join(dict.fromkeys(missing))} "
        f"(its network modes: {enforced}; its limits: "
        f"{', '.join(sorted(capabilities.limits)) or 'none'}); "
        f"choose another provider or ask for less (`trialkit sandbox check` shows each one)"
    )


def within(candidate: Path, root: Path) -> Path | None:
    """`candidate` with its links resolved on this machine, if it stays in `root`; None when
    a link leads out (one the agent made, say), so it is never followed out of the sandbox."""
    resolved, root = Path(os.path.realpath(candidate)), Path(os.path.realpath(root))
    return resolved if resolved == root or root in resolved.parents else None


@dataclass(frozen=True)
class SandboxInfo:
    """What a trial records of the sandbox that ran it."""

    provider: str
    isolated: bool
    network: NetworkMode
    grader_network: NetworkMode
    limits: Mapping[str, float | int]
    image: str | None = None
    details: Mapping[str, str] = field(default_factory=dict)
    """Provider facts worth keeping (e.g. `cgroup: v1`, the image's digest)."""


@dataclass(frozen=True)
class ExecResult:
    """How a command run by `Sandbox.exec` ended."""

    returncode: int
    """Its exit status; minus the signal's number when a signal ended it."""
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    limit: LimitName | None = None
    """The limit that ended it, if one did."""
    duration_s: float = 0.0

    @property
    def success(self) -> bool:
        return self.returncode == 0 and self.limit is None

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def raise_for_limit(self) -> ExecResult:
        """This result, or `LimitExceeded` when a limit ended the command."""
        if self.limit is not None:
            raise LimitExceeded(self.limit, f"sandbox limit hit: {self.limit}", self)
        return self


class SandboxProcess(ABC):
    """A process started in a sandbox by `Sandbox.open_process`."""

    stdin: anyio.abc.ByteSendStream | None
    stdout: anyio.abc.ByteReceiveStream | None
    stderr: anyio.abc.ByteReceiveStream | None

    @abstractmethod
    async def wait(self) -> int:
        """Its exit status (minus the signal's number when a signal ended it)."""

    @abstractmethod
    async def kill(self) -> None:
        """End it and every process it started in the sandbox."""

    @abstractmethod
    def limit(self) -> LimitName | None:
        """The limit that ended it (known once `wait` returned), or `None`."""

    @property
    @abstractmethod
    def returncode(self) -> int | None:
        """Its exit status once it ended, else `None`."""

    async def aclose(self) -> None:
        """End it if it still runs, wait for it, and release its pipes."""
        if self.returncode is None:
            await self.kill()
        await self.wait()


class Sandbox(ABC):
    """One trial's sandbox, started by `SandboxProvider.sandbox`."""

    provider: ClassVar[str] = ""

    def __init__(self, workspace: PurePosixPath, policy: SandboxPolicy) -> None:
        self.workspace = workspace
        """The workspace's path inside the sandbox (the default `cwd`)."""
        self.policy = policy
        self.phase: Phase = "agent"

    @property
    @abstractmethod
    def info(self) -> SandboxInfo:
        """What the trial records of this sandbox."""

    async def set_phase(self, phase: Phase) -> None:
        """From now on, processes get the network of `phase` (`"grader"` once the agent is
        done). Providers whose network is set per process need nothing more."""
        self.phase = phase

    async def allow(self, endpoints: Sequence[str]) -> None:
        """Let the `model-only` and `allowlist` networks reach `endpoints` too (URLs on this
        machine's loopback, e.g. an MCP server started for one turn), from the next process
        on. Providers that cannot add endpoints to a running sandbox raise `SandboxError`."""
        raise SandboxError(f"sandbox {self.provider!r} cannot add endpoints once started")

    @abstractmethod
    async def open_process(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        stdin: bool = False,
    ) -> SandboxProcess:
        """Start `argv` in the sandbox with pipes for stdout and stderr (and stdin when asked),
        in the environment of the policy plus `env` (nothing of the host's). Its wall-clock
        limit is the caller's to keep; the other limits are the sandbox's."""

    async def exec(
        self,
        argv: Sequence[str],
        *,
        input: bytes | str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the interface's name, as inspect_ai's
        output_bytes: int | None = None,
    ) -> ExecResult:
        """Run `argv` to its end (or its limit). Output past the cap stops the command
        (`limit="output"`); `timeout` (else the policy's wall clock) stops it with
        `limit="wall_clock"`. Everything it started is gone when this returns."""
        limits = self.policy.limits
        cap = output_bytes if output_bytes is not None else limits.output_bytes
        wall = timeout if timeout is not None else limits.wall_clock_seconds
        data = input.encode() if isinstance(input, str) else input
        process = await self.open_process(
            list(argv), cwd=cwd, env=env, user=user, stdin=data is not None
        )
        return ExecResult(**(await run_to_end(process, data, cap, wall))._asdict())

    def _host_path(self, path: str) -> Path | None:
        """Where `path` of the sandbox is on this machine, when it lies in a folder the trial
        owns there (see `within`): files there are read and written directly, without a
        process. None (the default): through `exec`."""
        return None

    def _wrote_on_host(self, path: Path) -> None:
        """`write_file` wrote `path` on this machine (a provider may give it to its user)."""
        return None

    async def read_file(self, path: str) -> bytes:
        """The bytes of the file at `path` in the sandbox (`FileNotFoundError` if none)."""
        host = self._host_path(path)
        if host is not None:
            return await anyio.Path(host).read_bytes()
        result = await self.exec(["cat", "--", path], output_bytes=1 << 40)
        if result.returncode != 0:
            raise FileNotFoundError(f"{path}: {result.stderr_text.strip()}")
        return result.stdout

    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write `data` to `path` in the sandbox, making its folders."""
        host = self._host_path(path)
        if host is not None:
            await anyio.Path(host.parent).mkdir(parents=True, exist_ok=True)
            await anyio.Path(host).write_bytes(data.encode() if isinstance(data, str) else data)
            self._wrote_on_host(host)
            return
        parent = str(PurePosixPath(path).parent)
        script = f"mkdir -p -- {shlex.quote(parent)} && cat > {shlex.quote(path)}"
        result = await self.exec(["sh", "-c", script], input=data)
        if result.returncode != 0:
            raise PermissionError(f"{path}: {result.stderr_text.strip() or 'cannot write'}")

    async def copy_in(self, source: Path, target: str) -> None:
        """Copy the host folder `source` to `target` in the sandbox (merged into it)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            archive.add(source, arcname=".")
        script = f"mkdir -p -- {shlex.quote(target)} && tar -x -f - -C {shlex.quote(target)}"
        result = await self.exec(["sh", "-c", script], input=buffer.getvalue())
        if result.returncode != 0:
            raise SandboxError(f"copy into {target}: {result.stderr_text.strip()}")

    async def copy_out(self, source: str, target: Path) -> None:
        """Copy the sandbox folder `source` to the host folder `target` (merged into it)."""
        result = await self.exec(["tar", "-c", "-f", "-", "-C", source, "."], output_bytes=1 << 40)
        if result.returncode != 0:
            raise SandboxError(f"copy out of {source}: {result.stderr_text.strip()}")

        def extract() -> None:
            target.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(result.stdout), mode="r") as archive:
                archive.extractall(target, filter="data")

        await anyio.to_thread.run_sync(extract)


class SandboxProvider(ABC):
    """A kind of sandbox, found by name through the `trialkit.sandboxes` entry points."""

    name: ClassVar[str]
    install_hint: ClassVar[str] = ""
    """The command that installs what the provider needs, for `SandboxUnavailable`."""
    host_paths_option: ClassVar[str | None] = None
    """The option (a list of absolute host paths) that shows more host paths read-only inside
    at the same paths, for providers that show only part of the host; `in_sandbox` adds a
    command-line agent's installation to it (`SubprocessAgent.runs_from`)."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What it can enforce on this machine."""

    def unavailable(self) -> str | None:
        """Why it cannot run here (with the install command), or `None` when it can."""
        return None

    def default_policy(self) -> SandboxPolicy:
        """The policy of a suite that names only this provider."""
        return SandboxPolicy(provider=self.name)

    def check(self, policy: SandboxPolicy) -> None:
        """`SandboxUnavailable` or `PolicyRefused` (one line each) when a run asking for
        `policy` must stop before any trial."""
        why = self.unavailable()
        if why is not None:
            raise SandboxUnavailable(why)
        line = refusal(self.name, self.capabilities(), policy)
        if line is not None:
            raise PolicyRefused(line)

    async def setup(self, policy: SandboxPolicy) -> None:  # noqa: B027 - most need none
        """Work done once per suite (an image build), before any trial."""

    async def teardown(self) -> None:  # noqa: B027 - most need none
        """Undo `setup`, after the last trial."""

    @abstractmethod
    def sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str] = ()
    ) -> AbstractAsyncContextManager[Sandbox]:
        """One trial's sandbox around the host folder `workspace`; `endpoints` are the URLs
        (model proxy, MCP servers) the `model-only` and `allowlist` networks reach."""

    async def cleanup(self) -> int:
        """Remove what killed runs left (containers, cgroups); how many things it removed."""
        return 0
