"""The container engine of the `docker` and `podman` providers: its command-line client (the
binary's name is the only difference), images named or built once per suite, and the removal of
what killed runs left.

An image a suite names must be on this machine or pullable; a Dockerfile it ships is built once
and tagged `trialkit-sandbox:<hash>`, the hash of its build context's content (every file's
path, mode and bytes), so the same context is never built twice. A base image (`FROM`) that is
not here and cannot be pulled is refused in one line naming it and the ways out.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import anyio

from trialkit.sandbox.base import SandboxError, SandboxUnavailable

__all__ = [
    "IMAGE_REPOSITORY",
    "LABEL",
    "LABEL_OWNER",
    "LABEL_RUN",
    "Engine",
    "context_hash",
]

LABEL = "org.trialkit.sandbox"
"""On every container (its value: the provider) and on every image trialkit built."""
LABEL_RUN = "org.trialkit.run"
"""The run that started the container."""
LABEL_OWNER = "org.trialkit.owner"
"""`host:pid` of the trialkit process that started it: cleanup removes those whose process is
gone (a killed run)."""
IMAGE_REPOSITORY = "trialkit-sandbox"
PULL_TIMEOUT_S = 120.0
_WAYS_OUT = (
    "load it (`docker load` / `docker import`), build one from Debian packages "
    "(debootstrap --variant=minbase, then `docker import`: .ci/docker.sh does it), "
    "or use the `bwrap` provider (no image needed)"
)


@dataclass(frozen=True)
class Output:
    returncode: int
    stdout: str
    stderr: str

    def line(self) -> str:
        """The last line the client printed on stderr (its error)."""
        lines = [text for text in self.stderr.strip().splitlines() if text.strip()]
        return lines[-1].strip() if lines else f"exit status {self.returncode}"


class Engine:
    """One container engine's client: `docker` or `podman` (with `--runtime runc` where
    given, for machines whose cgroup layout crun rejects)."""

    def __init__(self, binary: str, *, runtime: str | None = None) -> None:
        self.binary = binary
        self.runtime = runtime

    @property
    def install_hint(self) -> str:
        package = "docker.io" if self.binary == "docker" else self.binary
        return f"apt-get install {package} (and start its daemon)"

    def unavailable(self) -> str | None:
        """Why the engine cannot run containers here, or `None`."""
        if shutil.which(self.binary) is None:
            return f"sandbox {self.binary!r}: no `{self.binary}` command here; {self.install_hint}"
        try:
            done = subprocess.run(
                [self.binary, "version", "--format", "{{.Server.Version}}"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"sandbox {self.binary!r}: `{self.binary} version` failed: {exc}"
        if done.returncode != 0:
            why = Output(done.returncode, done.stdout, done.stderr).line()
            return f"sandbox {self.binary!r}: the {self.binary} daemon does not answer ({why})"
        return None

    async def run(self, *args: str, input: bytes | None = None, check: bool = True) -> Output:
        """Run the client to its end; `SandboxError` naming the command when it fails and
        `check` is set."""
        done = await anyio.run_process(
            [self.binary, *args],
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            check=False,
        )
        output = Output(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )
        if check and output.returncode != 0:
            raise SandboxError(f"{self.binary} {args[0]}: {output.line()}")
        return output

    async def has_image(self, image: str) -> bool:
        done = await self.run("image", "inspect", "--format", "{{.Id}}", image, check=False)
        return done.returncode == 0

    async def ensure_image(self, image: str, *, named_in: str) -> None:
        """`image` is here, pulled if it was not; else `SandboxUnavailable` in one line."""
        if await self.has_image(image):
            return
        why = f"no answer in {PULL_TIMEOUT_S:g} s"
        with anyio.move_on_after(PULL_TIMEOUT_S):
            pulled = await self.run("pull", "--quiet", image, check=False)
            if pulled.returncode == 0:
                return
            why = pulled.line()
        raise SandboxUnavailable(_not_here(self.binary, image, named_in, why))

    def require_images(self, image: str | None, dockerfile: Path | None) -> None:
        """Before any trial: the image, or the Dockerfile's base images, are here or can be
        pulled (then they are); else `SandboxUnavailable` (one line), or `SandboxError` for a
        Dockerfile that cannot be read."""
        wanted: list[tuple[str, str]] = []
        if dockerfile is not None:
            try:
                text = dockerfile.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise SandboxError(
                    f"sandbox {self.binary!r}: dockerfile: cannot read {dockerfile}: "
                    f"{exc.strerror or exc}"
                ) from exc
            wanted = [(base, f"FROM in {dockerfile}") for base in base_images(text)]
        elif image is not None:
            wanted = [(image, "the suite's image")]
        for name, named_in in wanted:
            if self._sync("image", "inspect", "--format", "{{.Id}}", name).returncode == 0:
                continue
            pulled = self._sync("pull", "--quiet", name, timeout=PULL_TIMEOUT_S)
            if pulled.returncode != 0:
                raise SandboxUnavailable(_not_here(self.binary, name, named_in, pulled.line()))

    def _sync(self, *args: str, timeout: float = 60.0) -> Output:
        try:
            done = subprocess.run(
                [self.binary, *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return Output(-1, "", f"no answer in {timeout:g} s")
        except OSError as exc:
            return Output(-1, "", str(exc))
        return Output(done.returncode, done.stdout, done.stderr)

    async def build(self, dockerfile: Path) -> str:
        """The tag of `dockerfile`'s image, built unless an image of the same context is here."""
        if not await anyio.Path(dockerfile).is_file():
            raise SandboxError(f"sandbox {self.binary!r}: dockerfile: no file {dockerfile}")
        context = dockerfile.parent
        text = await anyio.Path(dockerfile).read_text(encoding="utf-8", errors="replace")
        digest = await anyio.to_thread.run_sync(context_hash, context)
        tag = f"{IMAGE_REPOSITORY}:{digest[:16]}"
        if await self.has_image(tag):
            return tag
        for base in base_images(text):
            await self.ensure_image(base, named_in=f"FROM in {dockerfile}")
        built = await self.run(
            "build",
            "--quiet",
            "--label",
            f"{LABEL}=image",
            "--tag",
            tag,
            "--file",
            str(dockerfile),
            str(context),
            check=False,
        )
        if built.returncode != 0:
            raise SandboxError(f"sandbox {self.binary!r}: building {dockerfile}: {built.line()}")
        return tag

    async def remove(self, container: str) -> None:
        """Remove `container` at once (SIGKILL), if it is still there."""
        at_once = ["--time", "0"] if self.binary == "podman" else []  # docker kills at once
        await self.run("rm", "--force", *at_once, "--volumes", container, check=False)

    def run_args(self) -> list[str]:
        """The options every `run` of this engine needs here."""
        if self.runtime is None:
            return []
        return ["--runtime", self.runtime]

    async def cleanup(self, *, everything: bool = False) -> list[str]:
        """Remove the containers trialkit started whose process is gone (every one of them
        with `everything`); their names."""
        listed = await self.run("ps", "--all", "--quiet", "--filter", f"label={LABEL}")
        if not listed.stdout.split():
            return []
        # `inspect` reads the labels the same way in docker and podman (`ps` formats do not)
        shown = await self.run(
            "inspect",
            "--format",
            f'{{{{.Id}}}} {{{{.Name}}}} {{{{index .Config.Labels "{LABEL_OWNER}"}}}}',
            *listed.stdout.split(),
            check=False,
        )
        if shown.returncode != 0 and not shown.stdout.strip():
            raise SandboxError(f"{self.binary} inspect: {shown.line()}")
        listed = shown
        doomed: list[tuple[str, str]] = []
        for row in listed.stdout.splitlines():
            parts = row.split()
            if len(parts) < 2:
                continue
            owner = parts[2] if len(parts) > 2 else ""
            if everything or not owner_alive(owner):
                doomed.append((parts[0], parts[1].lstrip("/")))
        if doomed:
            # one by one: podman removes none of a list that names one gone meanwhile
            for ident, _ in doomed:
                await self.remove(ident)
        return [name for _, name in doomed]


def _not_here(binary: str, image: str, named_in: str, why: str) -> str:
    return (
        f"sandbox {binary!r}: the image {image!r} ({named_in}) is not on this machine "
        f"and cannot be pulled ({why}): {_WAYS_OUT}"
    )


def owner_alive(owner: str) -> bool:
    """Whether the `host:pid` owner is a live process of this machine (another machine's
    containers, which share a daemon, count as alive)."""
    host, _, pid = owner.rpartition(":")
    if not pid.isdigit():
        return False
    if host != os.uname().nodename:
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", re.I | re.M)


def base_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile starts from, except `scratch`, its own stages and references
    with build arguments (which only the build can resolve)."""
    stages: set[str] = set()
    images: list[str] = []
    for match in _FROM.finditer(dockerfile):
        image, alias = match.group(1), match.group(2)
        if image.lower() != "scratch" and image.lower() not in stages and "$" not in image:
            images.append(image)
        if alias:
            stages.add(alias.lower())
    return list(dict.fromkeys(images))


def context_hash(context: Path) -> str:
    """SHA-256 of a build context: every file's relative path, executable bit and bytes (and
    every symlink's target), in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(context.rglob("*")):
        relative = path.relative_to(context).as_posix()
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            digest.update(f"L {relative} -> {os.readlink(path)}\0".encode())
        elif stat.S_ISREG(info.st_mode):
            digest.update(f"F {relative} {bool(info.st_mode & 0o111):d}\0".encode())
            with path.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            digest.update(b"\0")
        elif stat.S_ISDIR(info.st_mode):
            digest.update(f"D {relative}\0".encode())
    return digest.hexdigest()
