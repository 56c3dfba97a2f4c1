"""What the real command-line agents leave in, and take from, the machine's temp folder.

Each run here happens in a network namespace with only a loopback interface and a mount
namespace of its own, where a fresh folder of the test is bound over `/tmp`: that folder is then
both the `tempfile.gettempdir()` of trialkit and the `/tmp` of Codex, and no other test's files
are in it.

- Codex, recorded and replayed (`scenario.py`), must leave nothing there: its own sandbox
  protects `.git`, `.codex` and `.agents` in every writable root by making them, and a
  `/tmp/.git` it once left made Claude Code believe it worked in a git repository.
- Claude Code, replaying `examples/claude_code` with a `.git` folder in `/tmp` (the parent of
  the system's workspaces), must still find its recorded calls: the workspace is made where no
  folder above it holds a `.git`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_agents.conftest import find_cli, loopback_namespace
from tests.examples.test_claude_code import EXAMPLE, readme_command

CODEX_OWN = f"codex-daemon-{os.getuid()}"
"""A folder Codex makes at this fixed path in `/tmp` whatever `TMPDIR` says (for its daemon's
socket): Codex's, the same for every run, and not trialkit's to remove."""
PROTECTED = {".git", ".codex", ".agents"}


class Creations:
    """The names made directly in `folder` while it is watched (inotify): a folder that was
    made and removed again is seen as well."""

    IN_CREATE, IN_NONBLOCK = 0x100, 0o4000

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = libc.inotify_init1(self.IN_NONBLOCK)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, bytes(folder), self.IN_CREATE) < 0:
            pytest.fail(f"inotify: {os.strerror(ctypes.get_errno())}")

    def names(self) -> set[str]:
        seen: set[str] = set()
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                os.close(self.fd)
                return seen
            at = 0
            while at < len(data):
                _wd, _mask, _cookie, size = struct.unpack_from("iIII", data, at)
                seen.add(data[at + 16 : at + 16 + size].rstrip(b"\0").decode())
                at += 16 + size


def in_own_tmp(root: Path, cwd: str, argv: list[str], env: dict[str, str]) -> str:
    """Run `argv` with `root` bound over `/tmp` (in namespaces of its own), from `cwd`, a path
    as seen inside; returns the output when it succeeds."""
    loopback_namespace()  # a skip (or a failure) where namespaces cannot be made
    base = ["unshare", "--net", "--mount"]
    if os.geteuid() != 0:
        base.append("--map-root-user")
    script = 'mount --bind "$0" /tmp && ip link set lo up && cd "$1" && shift && exec "$@"'
    done = subprocess.run(
        [*base, "sh", "-c", script, str(root), cwd, *argv],
        env={k: v for k, v in env.items() if k not in ("TMPDIR", "TEMP", "TMP")},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_a_codex_run_leaves_nothing_in_the_temp_folder(tmp_path: Path, repo_root: Path) -> None:
    codex = find_cli("codex")
    root = tmp_path / "tmp"
    root.mkdir()
    argv = [sys.executable, "-m", "tests.cli_agents.scenario", "codex", codex, "/tmp/out"]
    watch = Creations(root)
    in_own_tmp(root, str(repo_root), argv, dict(os.environ))
    made = watch.names()
    assert "out" in made and any(n.startswith("trialkit-") for n in made)  # the watch works
    assert not made & PROTECTED, f"Codex's sandbox made {sorted(made & PROTECTED)} in /tmp"
    summary = json.loads((root / "out" / "summary.json").read_text())
    assert (summary["record"]["exit"], summary["replay"]["exit"]) == (0, 0), summary
    assert summary["changed"]["exit"] != 0  # Codex ran: a changed prompt is a strict miss
    left = {p.name for p in root.iterdir()} - {"out"}
    assert not left & PROTECTED, left
    assert left <= {CODEX_OWN}, f"left in the temp folder: {sorted(left)}"


def test_claude_code_replays_the_same_with_a_git_folder_above_the_workspaces(
    tmp_path: Path, repo_root: Path
) -> None:
    claude = find_cli("claude")
    root = tmp_path / "tmp"
    (root / ".git").mkdir(parents=True)  # as Codex's sandbox once left it: empty
    shutil.copytree(EXAMPLE, root / "ex" / "examples" / "claude_code")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "OPENAI_", "TRIALKIT_", "CLAUDE"))
    }
    env["PATH"] = f"{Path(claude).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(repo_root / "src")
    ours = ["--json", "report.json", "--store", "store.db", "--no-progress"]
    argv = [sys.executable, "-m", "trialkit", "run", *readme_command(), *ours]
    in_own_tmp(root, "/tmp/ex", argv, env)
    report = json.loads((root / "ex" / "report.json").read_text())
    (task,) = report["tasks"]
    assert (task["verdict"], task["passed"], task["trials"]) == ("pass", 3, 3), task
    for trial in task["results"]:
        assert trial["output"] == 'Fixed the typo: greet.py now says "Hello, world!".'
    assert not any((root / ".git").iterdir())  # the stray folder was not the agent's
    assert {p.name for p in root.iterdir()} == {".git", "ex"}
