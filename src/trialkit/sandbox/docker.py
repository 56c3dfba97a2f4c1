"""The `docker` and `podman` providers: one container per trial, from an image the suite names
or a Dockerfile it ships (built once per suite, `trialkit-sandbox:<hash of its context>`).

A trial's container runs the image with `--network none` (`host` only when a suite asks for the
host's network in every phase), a read-only root with private `/tmp` and `HOME` (tmpfs), the
workspace bind-mounted read-write at its own path, as a non-root user (the host's user, or
`1000:1000` when trialkit runs as root: the workspace is handed to that user for the trial and
back afterwards), no new privileges, and the limits as the engine's own flags: `--memory`
(swap included), `--pids-limit`, `--ulimit cpu`, `--cpus` (option `cpus`); the wall clock and the
output caps are trialkit's, around each `exec`. `model-only`: trialkit's endpoints (its model
proxy, its MCP servers) are reached inside at the same loopback URLs through `_relay`;
`allowlist`: those and the policy's `allow` destinations, resolved before the container starts,
each at its own address and port inside (`_allow`), their names given by `--add-host`.

Every container carries the labels `org.trialkit.sandbox`, `org.trialkit.run` and
`org.trialkit.owner` (`host:pid`). Its first process reads trialkit's pipe and ends when that
closes, so a killed run's containers end with it (`--rm` removes them); `trialkit sandbox
cleanup` removes any a killed run left all the same (a daemon that was down, a stuck client).

Podman is the same code with the `podman` command, `--runtime runc` by default (crun rejects
some cgroup v1 layouts) and explicit `nofile`/`nproc` ulimits (its defaults may exceed what
runc may set in a container).
"""

from __future__ import annotations

import os
import resource
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.abc

from trialkit.sandbox._allow import allowed_for, check_allow
from trialkit.sandbox._container import ContainerSandbox
from trialkit.sandbox._engine import Engine
from trialkit.sandbox._ramp import AliveGate, alive_bound, start_bound
from trialkit.sandbox._relay import why_no_relay
from trialkit.sandbox.base import (
    Capabilities,
    NetworkMode,
    NetworkPolicy,
    PolicyRefused,
    Sandbox,
    SandboxError,
    SandboxPolicy,
    SandboxProvider,
)

__all__ = ["IMAGE_ENV", "DockerProvider", "PodmanProvider"]

IMAGE_ENV = "TRIALKIT_SANDBOX_IMAGE"
"""The image of a `docker` or `podman` sandbox whose policy names none."""
_INITS = (
    "/usr/libexec/podman/catatonit",
    "/usr/bin/catatonit",
    "/usr/bin/tini-static",
    "/usr/bin/tini",
    "/usr/sbin/docker-init",
    "/usr/bin/docker-init",
)


ALIVE_PER_CPU = 4
"""Containers alive at once per CPU, by default. A container holds a runtime shim, its mounts
and the engine's bookkeeping for its whole trial, and the engine slows for every container
alive; trials mostly wait on the model, so a few per core keep the CPUs busy without a burst
of hundreds piling onto one daemon."""


class DockerProvider(SandboxProvider):
    """One container per trial (see the module's docstring). Options: `image`, `user`,
    `cpus`, `read_only_root` (default true), `read_only` and `read_write` (more host paths,
    bound at the same paths), `run_id` (the label's value; a new id by default), `starts`
    (containers starting at once; default: the machine's CPU count), `alive` (containers alive
    at once; default: `ALIVE_PER_CPU` times the CPU count)."""

    name: ClassVar[str] = "docker"
    binary: ClassVar[str] = "docker"
    install_hint: ClassVar[str] = "apt-get install docker.io (and start dockerd)"
    host_paths_option = "read_only"
    tmpfs_owner: ClassVar[bool] = True
    """The engine takes `uid=`/`gid=` options for a tmpfs (podman does not)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.engine = Engine(self.binary, runtime=self.default_runtime())
        self.run_id = str(options.get("run_id") or uuid.uuid4().hex)
        self._images: dict[tuple[str | None, str | None], str] = {}
        self._checked: set[tuple[str | None, str]] = set()
        self._why_not: str | bool | None = False
        self._lock = anyio.Lock()
        self._starting = anyio.Semaphore(start_bound(self.name, options.get("starts")))
        bound = alive_bound(self.name, options.get("alive"), ALIVE_PER_CPU)
        self.living = AliveGate(bound)

    def default_runtime(self) -> str | None:
        return self.options.get("runtime")

    def default_image(self) -> str | None:
        """The image of a policy that names none: the `image` option, else
        `$TRIALKIT_SANDBOX_IMAGE`."""
        image = self.options.get("image") or os.environ.get(IMAGE_ENV)
        return str(image) if image else None

    def default_policy(self) -> SandboxPolicy:
        # model-only where the bridge can be made (root), else no network at all
        network = NetworkPolicy("model-only" if why_no_relay() is None else "none")
        return SandboxPolicy(provider=self.name, network=network, image=self.default_image())

    def _no_image(self) -> str:
        return (
            f"sandbox {self.name!r} needs an image: sandbox: {{provider: {self.name}, "
            f"image: NAME}} or {{provider: {self.name}, dockerfile: PATH}} in the suite, "
            f"or ${IMAGE_ENV}"
        )

    def extra_run_args(self) -> list[str]:
        return []

    def init_args(self) -> list[str]:
        """A first process that reaps orphans (the engine's own)."""
        return ["--init"]

    def capabilities(self) -> Capabilities:
        network: set[NetworkMode] = {"none", "host"}
        relay = why_no_relay()
        if relay is None:
            network |= {"model-only", "allowlist"}
        return Capabilities(
            isolation=True,
            network=frozenset(network),
            limits=frozenset({"memory", "processes", "cpu_time", "wall_clock", "output"}),
            users=True,
            images=True,
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
        check_allow(policy)
        if policy.image is None and policy.dockerfile is None and self.default_image() is None:
            raise PolicyRefused(self._no_image())
        modes = {policy.network.mode, policy.grader_network.mode}
        if "host" in modes and len(modes) > 1:
            raise PolicyRefused(
                f"sandbox {self.name!r} cannot change between the host's network and "
                f"{' / '.join(sorted(modes - {'host'}))} within a trial; ask for one network"
            )
        # an image that is not here and cannot be pulled: refused before any trial
        image = policy.image or self.default_image()
        key = (image, str(policy.dockerfile or ""))
        if key not in self._checked:
            dockerfile = Path(policy.dockerfile) if policy.dockerfile else None
            self.engine.require_images(image, dockerfile)
            self._checked.add(key)

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
                image = self.default_image() if policy.image is None else policy.image
                if policy.dockerfile is not None:
                    self._images[key] = await self.engine.build(Path(policy.dockerfile))
                elif image is not None:
                    await self.engine.ensure_image(image, named_in="the suite's image")
                    self._images[key] = image
                else:
                    raise PolicyRefused(self._no_image())
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
        box.endpoints = box.bridged(endpoints)
        box.allowed = await anyio.to_thread.run_sync(allowed_for, policy)  # resolved outside
        async with self.living.alive():  # past the bound, wait for a trial's container to end
            async with self._starting:  # a burst of trials starts a few containers at a time
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
