"""`Workspace`: a fresh copy of a fixture folder per trial, and a diff of what the agent did.

Each trial gets its own temporary folder (`tempfile.mkdtemp(prefix="trialkit-")`) holding a copy
of the fixture; the agent finds it at `ctx.world.path`. After the agent's turns, `capture`
records into the outcome:

- `outcome.diff`: every added, modified and deleted file, sorted by path. Text files get a
  unified diff (`a/path` / `b/path` headers, `/dev/null` for the missing side), cut at
  `max_diff_bytes` with `truncated=True`. Binary files (a NUL byte in the first 8 KB, or not
  UTF-8) get `binary=True` and no diff. Files over `max_file_bytes` are compared by hash only:
  `truncated=True` and a note in `diff`. A rename shows as a deletion plus an addition; when
  the added file has exactly the content of a deleted one its `diff` says `renamed from X`.
  Symlinks are never followed: a symlink is recorded by its target text, and one that points
  outside the workspace is recorded with a note that it was refused and not read.
- `outcome.artifacts`: the files matching the `artifacts` globs (text content under
  `max_file_bytes`, size, media type).
- `outcome.state`: whatever the `state` hook returns, merged in.

`ignore` patterns (gitignore-like: `*` and `**` match across `/`, and a pattern matches at any
depth) leave files out of the diff; they are still copied.

A workspace whose folder disappeared during the trial makes `capture` raise, so the trial is an
error, never a pass.

Keeping workspaces: with `keep="all"` every folder is moved to
`keep_dir/<run id or timestamp>/<task id>#<trial>` at teardown; with `keep="none"` every folder
is removed; with `keep="failing"` (the default) the folder is kept when the trial did not pass.
The runner tells the workspace the verdict by calling `keep_for(world, verdict, run_id=...)`
just before `teardown`; when it has not, a trial counts as failing when capture never completed
(an error or a timeout) or the agent reported failure.
"""

from __future__ import annotations

import fnmatch
import inspect
import mimetypes
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread

from trialkit.environments.base import Environment
from trialkit.environments.diff import FileInfo, link_info, read_info, unified_diff
from trialkit.outcome import Artifact, FileChange, WorkspaceDiff
from trialkit.score import Verdict

if TYPE_CHECKING:
    from trialkit.outcome import Outcome
    from trialkit.task import Task

KeepMode = Literal["failing", "all", "none"]
StateHook = Callable[["WorkspaceWorld"], Mapping[str, Any] | Awaitable[Mapping[str, Any]]]


class WorkspaceError(RuntimeError):
    """A workspace could not be set up or captured (the trial becomes an error)."""


@dataclass
class WorkspaceWorld:
    """The world of one workspace trial; agents work in `path`."""

    path: Path
    task_id: str
    trial_index: int
    snapshot: dict[str, FileInfo] = field(default_factory=dict)
    """The files at the start of the trial: relative path (`/` separators) -> size, sha256,
    binary flag, and the target text for a symlink."""
    fixture: Path | None = None
    captured: bool = False
    """Set when `capture` completed."""
    outcome_failed: bool = False
    """The agent reported failure (seen by `capture`)."""
    verdict: Verdict | None = None
    """The trial's verdict, when the runner passed it via `Workspace.keep_for`."""
    run_id: str | None = None
    kept_at: Path | None = None
    """Where teardown kept the folder, if it kept it."""

    def __fspath__(self) -> str:
        return str(self.path)


class Workspace(Environment):
    """Copies `fixture` (a folder, or nothing for an empty workspace) into a fresh temporary
    folder per trial and captures the diff, artifacts and state facts; see the module docs."""

    name = "workspace"

    def __init__(
        self,
        fixture: str | Path | None = None,
        *,
        artifacts: Sequence[str] = (),
        state: StateHook | None = None,
        keep: KeepMode = "failing",
        keep_dir: str | Path = ".trialkit/workspaces",
        max_diff_bytes: int = 64_000,
        max_file_bytes: int = 1_000_000,
        ignore: Sequence[str] = (".git/**", "__pycache__/**"),
        temp_dir: str | Path | None = None,
    ) -> None:
        if keep not in ("failing", "all", "none"):
            raise ValueError(f"keep must be 'failing', 'all' or 'none', got {keep!r}")
        if max_diff_bytes < 1 or max_file_bytes < 1:
            raise ValueError("max_diff_bytes and max_file_bytes must be >= 1")
        if isinstance(artifacts, str) or isinstance(ignore, str):
            raise TypeError("artifacts and ignore take a list of glob patterns, not a string")
        self.fixture = Path(fixture) if fixture is not None else None
        self.artifacts = list(artifacts)
        self.state = state
        self.keep: KeepMode = keep
        self.keep_dir = Path(keep_dir)
        self.max_diff_bytes = max_diff_bytes
        self.max_file_bytes = max_file_bytes
        self.ignore = list(ignore)
        self.temp_dir = Path(temp_dir) if temp_dir is not None else None
        self._stamp: str | None = None

    # -- the Environment protocol -------------------------------------------------------------

    async def setup(self, task: Task, trial_index: int) -> WorkspaceWorld:
        return await anyio.to_thread.run_sync(self._setup, task.id, trial_index)

    async def capture(self, world: WorkspaceWorld, outcome: Outcome) -> None:
        files, artifacts = await anyio.to_thread.run_sync(self._capture_files, world)
        outcome.diff = WorkspaceDiff(files=files)
        outcome.artifacts.extend(artifacts)
        if self.state is not None:
            result = self.state(world)
            if inspect.isawaitable(result):
                result = await result
            if not isinstance(result, Mapping):
                raise TypeError(
                    f"the workspace state hook must return a dict, got {type(result).__name__}"
                )
            outcome.state.update(result)
        world.outcome_failed = outcome.failed
        world.captured = True

    async def teardown(self, world: WorkspaceWorld) -> None:
        await anyio.to_thread.run_sync(self._teardown, world)

    def keep_for(
        self, world: WorkspaceWorld, verdict: Verdict | str, *, run_id: str | None = None
    ) -> bool:
        """Tell the workspace the trial's verdict before `teardown`; returns whether teardown
        will keep the folder."""
        world.verdict = Verdict(verdict)
        world.run_id = run_id
        return self.should_keep(world)

    def should_keep(self, world: WorkspaceWorld) -> bool:
        if self.keep == "all":
            return True
        if self.keep == "none":
            return False
        if world.verdict is not None:
            return world.verdict is not Verdict.PASS
        return not world.captured or world.outcome_failed

    # -- setup ---------------------------------------------------------------------------------

    def _setup(self, task_id: str, trial_index: int) -> WorkspaceWorld:
        fixture = self.fixture
        if fixture is not None and not fixture.is_dir():
            what = "is not a folder" if fixture.exists() else "does not exist"
            raise WorkspaceError(f"the workspace fixture {str(fixture)!r} {what}")
        if self.temp_dir is not None:
            self.temp_dir.mkdir(parents=True, exist_ok=True)
        base = self.temp_dir if self.temp_dir is not None else _temp_base()
        root = Path(tempfile.mkdtemp(prefix="trialkit-", dir=base))
        try:
            if fixture is not None:
                _copy_fixture(fixture, root)
            snapshot = _scan(root, self.ignore, self.max_file_bytes)
        except BaseException:
            _remove(root)
            raise
        return WorkspaceWorld(
            path=root,
            task_id=task_id,
            trial_index=trial_index,
            snapshot=snapshot,
            fixture=fixture.resolve() if fixture is not None else None,
        )

    # -- capture -------------------------------------------------------------------------------

    def _capture_files(self, world: WorkspaceWorld) -> tuple[list[FileChange], list[Artifact]]:
        root = world.path
        if root.is_symlink() or not root.is_dir():
            raise WorkspaceError(f"the workspace folder was removed during the trial: {root}")
        real_root = os.path.realpath(root)
        now = _scan(root, self.ignore, self.max_file_bytes)
        changes: list[FileChange] = []
        for rel in sorted(set(world.snapshot) | set(now)):
            old, new = world.snapshot.get(rel), now.get(rel)
            if old == new:
                continue
            changes.append(self._change(world, real_root, rel, old, new))
        _note_renames(changes, world.snapshot, now)
        artifacts = self._artifacts(root, real_root)
        return changes, artifacts

    def _change(
        self,
        world: WorkspaceWorld,
        real_root: str,
        rel: str,
        old: FileInfo | None,
        new: FileInfo | None,
    ) -> FileChange:
        kind: Literal["added", "modified", "deleted"] = (
            "added" if old is None else "deleted" if new is None else "modified"
        )
        if new is None:
            assert old is not None
            if old.link is not None:
                return FileChange(path=rel, change=kind, diff=f"symlink -> {old.link}")
            if old.is_binary or old.size > self.max_file_bytes:
                return self._opaque(rel, kind, old)
            original = self._original(world, rel, old)
            if original is None:
                return FileChange(
                    path=rel, change=kind, size=old.size, diff=_ORIGINAL_GONE, truncated=True
                )
            text, cut = unified_diff(original, None, rel, self.max_diff_bytes)
            return FileChange(path=rel, change=kind, size=old.size, diff=text, truncated=cut)
        if new.link is not None:
            full = os.path.join(world.path, *rel.split("/"))
            if _inside(real_root, os.path.realpath(full)):
                note = f"symlink -> {new.link}"
            else:
                note = (
                    f"[trialkit: symlink to outside the workspace (-> {new.link}); "
                    "refused, not read]"
                )
            return FileChange(path=rel, change=kind, size=new.size, diff=note)
        if new.is_binary or new.size > self.max_file_bytes:
            return self._opaque(rel, kind, new)
        if old is not None and (old.link is not None or old.is_binary):
            return FileChange(path=rel, change=kind, size=new.size, binary=old.is_binary)
        _, data = read_info(os.path.join(world.path, *rel.split("/")), self.max_file_bytes)
        after = (data or b"").decode("utf-8", "replace")
        before: str | None = None
        if old is not None:
            if old.size > self.max_file_bytes:
                return self._opaque(rel, kind, old).model_copy(update={"size": new.size})
            before = self._original(world, rel, old)
            if before is None:
                return FileChange(
                    path=rel, change=kind, size=new.size, diff=_ORIGINAL_GONE, truncated=True
                )
        text, cut = unified_diff(before, after, rel, self.max_diff_bytes)
        return FileChange(path=rel, change=kind, size=new.size, diff=text, truncated=cut)

    def _opaque(
        self, rel: str, kind: Literal["added", "modified", "deleted"], info: FileInfo
    ) -> FileChange:
        if info.size > self.max_file_bytes:
            return FileChange(
                path=rel,
                change=kind,
                binary=info.is_binary,
                size=info.size,
                truncated=True,
                diff=f"[trialkit: file of {info.size} bytes is over the {self.max_file_bytes}"
                "-byte limit; compared by hash only]",
            )
        return FileChange(path=rel, change=kind, binary=True, size=info.size)

    def _original(self, world: WorkspaceWorld, rel: str, info: FileInfo) -> str | None:
        """The fixture's text of `rel`, if the fixture still holds what was copied."""
        if world.fixture is None:
            return None
        try:
            now, data = read_info(os.path.join(world.fixture, *rel.split("/")), self.max_file_bytes)
        except OSError:
            return None
        if data is None or now.sha256 != info.sha256:
            return None
        return data.decode("utf-8", "replace")

    def _artifacts(self, root: Path, real_root: str) -> list[Artifact]:
        found: dict[str, Artifact] = {}
        for pattern in self.artifacts:
            for match in sorted(root.glob(pattern)):
                rel = match.relative_to(root).as_posix()
                if rel in found:
                    continue
                real = os.path.realpath(match)
                if not _inside(real_root, real) or not os.path.isfile(real):
                    continue
                try:
                    info, data = read_info(real, self.max_file_bytes)
                except OSError:
                    continue
                content = None
                if data is not None and not info.is_binary:
                    content = data.decode("utf-8")
                found[rel] = Artifact(
                    path=rel,
                    content=content,
                    size=info.size,
                    media_type=mimetypes.guess_type(rel)[0],
                )
        return [found[k] for k in sorted(found)]

    # -- teardown ------------------------------------------------------------------------------

    def _teardown(self, world: WorkspaceWorld) -> None:
        root = world.path
        if not root.exists() and not root.is_symlink():
            return
        if root.is_symlink() or not root.is_dir():
            root.unlink()
            return
        if self.should_keep(world):
            if self._stamp is None:
                self._stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            base = self.keep_dir / _safe(world.run_id or self._stamp)
            base.mkdir(parents=True, exist_ok=True)
            name = f"{_safe(world.task_id)}#{world.trial_index}"
            dest = base / name
            n = 1
            while dest.exists() or dest.is_symlink():
                n += 1
                dest = base / f"{name}-{n}"
            shutil.move(str(root), str(dest))
            world.kept_at = dest
        else:
            _remove(root)


_ORIGINAL_GONE = "[trialkit: the fixture no longer holds the original; compared by hash only]"


def _note_renames(
    changes: list[FileChange], before: Mapping[str, FileInfo], after: Mapping[str, FileInfo]
) -> None:
    """Mark an added file with exactly a deleted file's content as `renamed from X`."""
    deleted: dict[str, list[str]] = {}
    for c in changes:
        info = before.get(c.path)
        if c.change == "deleted" and info is not None and info.link is None:
            deleted.setdefault(info.sha256, []).append(c.path)
    for c in changes:
        info = after.get(c.path)
        if c.change != "added" or info is None or info.link is not None:
            continue
        sources = deleted.get(info.sha256)
        if sources:
            c.diff = f"renamed from {sources.pop(0)}"
            c.truncated = False


def _inside(real_root: str, real_path: str) -> bool:
    try:
        return os.path.commonpath([real_root, real_path]) == real_root
    except ValueError:
        return False


def _ignored(rel: str, patterns: Sequence[str]) -> bool:
    parts = rel.split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts)) if parts[i]]
    return any(fnmatch.fnmatchcase(t, p) for t in tails for p in patterns)


def _scan(root: Path, ignore: Sequence[str], max_bytes: int) -> dict[str, FileInfo]:
    """Every regular file and symlink under `root`, never following a symlink."""
    out: dict[str, FileInfo] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        descend = []
        for name in dirnames:
            rel = prefix + name
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                if not _ignored(rel, ignore):
                    out[rel] = link_info(os.readlink(full))
            elif not _ignored(rel + "/", ignore):
                descend.append(name)
        dirnames[:] = descend
        for name in filenames:
            rel = prefix + name
            if _ignored(rel, ignore):
                continue
            full = os.path.join(dirpath, name)
            try:
                mode = os.lstat(full).st_mode
                if stat.S_ISLNK(mode):
                    out[rel] = link_info(os.readlink(full))
                elif stat.S_ISREG(mode):
                    out[rel] = read_info(full, max_bytes)[0]
            except FileNotFoundError:
                continue
    return out


TEMP_BASES = ("/var/tmp", "/dev/shm")
"""Where workspaces go when the system's temp folder is inside a git repository."""


def _temp_base() -> str | None:
    """The folder for a new workspace: the system's temp folder, unless it or a folder above
    it holds a `.git` (a stray `/tmp/.git` another program left), which agents that look
    upward for a repository (Claude Code does) would take as theirs; then the first of
    `TEMP_BASES` outside any repository that can be written. `None` (the system's) when none."""
    system = tempfile.gettempdir()
    for base in (system, *TEMP_BASES):
        if not _in_repository(Path(base)) and os.access(base, os.W_OK | os.X_OK):
            return None if base == system else base
    return None


def _in_repository(folder: Path) -> bool:
    """Whether `folder` or one above it holds `.git` (a folder or a file)."""
    return any(os.path.lexists(p / ".git") for p in (folder, *folder.parents))


def _copy_fixture(src: Path, dest: Path) -> None:
    """Copy `src` into `dest`, keeping symlinks that point inside `src` and refusing others."""
    real_src = os.path.realpath(src)
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel_dir = os.path.relpath(dirpath, src)
        out_dir = dest if rel_dir == "." else dest / rel_dir
        for name in [*dirnames, *filenames]:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")
            target_path = out_dir / name
            if os.path.islink(full):
                target = os.readlink(full)
                resolved = os.path.realpath(full)
                if not _inside(real_src, resolved):
                    raise WorkspaceError(
                        f"the fixture's symlink {rel!r} points outside the fixture "
                        f"(-> {target}); refusing to copy it"
                    )
                if os.path.isabs(target):
                    target = os.path.relpath(resolved, os.path.realpath(dirpath))
                os.symlink(target, target_path, target_is_directory=os.path.isdir(resolved))
            elif os.path.isdir(full):
                target_path.mkdir()
            elif os.path.isfile(full):
                shutil.copy2(full, target_path, follow_symlinks=False)


def _safe(name: str) -> str:
    cleaned = re.sub(r"[^\w.#=+@-]", "_", name)
    return "_" if cleaned in ("", ".", "..") else cleaned


def _remove(path: Path) -> None:
    """Remove a folder, making read-only parts writable first; never follows symlinks."""

    def retry(func: Callable[..., Any], p: str, *_: Any) -> None:
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
            func(p)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=retry)
    else:
        shutil.rmtree(path, onerror=retry)
