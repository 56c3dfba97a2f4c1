"""Cassette files that are not what they are named: a symbolic link to `/dev/zero`, a FIFO, a
folder, a socket, a link out of the cassette or to nothing, a file over the size cap. Every
reader refuses them with one line naming the file, without reading them (bounded time, and
memory measured with tracemalloc): replay and `auto` lookups, recording, the closest-recording
search of a miss, `cache stats|verify|prune`, the manifest, and the keeper of a Ray run."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from trialkit.cli.main import cli
from trialkit.executors.ray_cassette import CassetteKeeper
from trialkit.models import cassette_files
from trialkit.models.base import ModelRequest, ModelResponse
from trialkit.models.cassette import MANIFEST, MAX_FILE_BYTES, Cassette, CassetteError, CassetteMiss
from trialkit.models.cassette_tools import cassette_stats, prune_cassette, verify_cassette
from trialkit.transcript import Message

MODEL = "openai/gpt-4o-mini"
REQUEST = ModelRequest(messages=[Message(role="user", content="hi")])
OTHER = ModelRequest(messages=[Message(role="user", content="bye")])
ANSWER = ModelResponse(message=Message(role="assistant", content="hello"))
MEMORY_LIMIT = 4 * 1024 * 1024
"""What reading a refused file may allocate at its peak (it allocated gigabytes before)."""


def recorded(root: Path) -> Path:
    Cassette(root, "record").record(MODEL, REQUEST, ANSWER, trial=0, occurrence=0)
    [path] = root.glob("*/*/*.json")
    return path


def _dev_zero(path: Path, root: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path, root: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path, root: Path) -> None:
    path.mkdir()
    (path / "inside.json").write_text("{}")


def _socket(path: Path, root: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="tk", dir="/tmp")) / "s"  # a socket path is short
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(short))
    short.rename(path)  # the socket file stays


def _too_large(path: Path, root: Path) -> None:
    with path.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written to the disk


def _link_outside(path: Path, root: Path) -> None:
    outside = root.parent / "outside.json"
    outside.write_text(path.with_suffix(".bak").read_text())  # a valid recording, elsewhere
    path.symlink_to(outside)


def _dangling(path: Path, root: Path) -> None:
    path.symlink_to(root / "nowhere.json")


def _link_loop(path: Path, root: Path) -> None:
    path.symlink_to(path)


KINDS: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "dev_zero": (_dev_zero, "a symbolic link to /dev/zero, a character device, not a regular"),
    "fifo": (_fifo, "a FIFO (named pipe), not a regular file"),
    "folder": (_folder, "a folder, not a regular file"),
    "socket": (_socket, "cannot be read"),
    "too_large": (_too_large, f"{MAX_FILE_BYTES + 1:,} bytes, over the {MAX_FILE_BYTES:,}"),
    "link_outside": (_link_outside, "outside the cassette folder"),
    "dangling": (_dangling, "which does not exist"),
    "link_loop": (_link_loop, "cannot be read"),
}


@pytest.fixture(params=sorted(KINDS))
def odd(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path, str]:
    """A cassette whose one recording was replaced by something else."""
    root = tmp_path / "cassette"
    path = recorded(root)
    path.rename(path.with_suffix(".bak"))
    make, says = KINDS[request.param]
    make(path, root)
    path.with_suffix(".bak").unlink()
    return root, path, says


def bounded(read: Callable[[], Any]) -> tuple[BaseException | None, int]:
    """What `read` raised (None when it returned) and its peak traced memory; run in a thread
    that must end within 60 s (a reader that waits on a FIFO, or reads /dev/zero, never does)."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            read()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    tracemalloc.start()
    try:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join(60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not thread.is_alive(), "the reader did not come back"
    return outcome[0], peak


def test_replay_and_auto_refuse_it_naming_it(odd: tuple[Path, Path, str]) -> None:
    root, path, says = odd
    for mode in ("replay", "auto"):
        error, peak = bounded(
            lambda mode=mode: Cassette(root, mode).lookup(MODEL, REQUEST, trial=0, occurrence=0)
        )
        assert isinstance(error, CassetteError), error
        assert str(error).startswith(f"{path}: ") and says in str(error)
        assert "\n" not in str(error)
        assert peak < MEMORY_LIMIT, peak


def test_recording_over_it_is_refused(odd: tuple[Path, Path, str]) -> None:
    root, path, says = odd
    error, peak = bounded(
        lambda: Cassette(root, "record").record(MODEL, REQUEST, ANSWER, trial=1, occurrence=0)
    )
    assert isinstance(error, CassetteError) and str(path) in str(error) and says in str(error)
    assert peak < MEMORY_LIMIT, peak


def test_a_miss_beside_it_is_still_a_miss(odd: tuple[Path, Path, str]) -> None:
    root, _, _ = odd
    error, peak = bounded(
        lambda: Cassette(root, "replay").miss(MODEL, OTHER, task_id="t", trial=0, occurrence=0)
    )
    assert error is None  # `miss` builds the error, reading the neighbours it can
    assert peak < MEMORY_LIMIT, peak
    miss = Cassette(root, "replay").miss(MODEL, OTHER, task_id="t", trial=0, occurrence=0)
    assert isinstance(miss, CassetteMiss)


def test_cache_commands_name_it_on_one_line(odd: tuple[Path, Path, str]) -> None:
    root, path, says = odd
    runner = CliRunner()
    error, peak = bounded(lambda: (cassette_stats(root), verify_cassette(root)))
    assert error is None and peak < MEMORY_LIMIT, (error, peak)

    stats = runner.invoke(cli, ["cache", "stats", str(root), "--json"])
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["invalid_files"] == 1

    verify = runner.invoke(cli, ["cache", "verify", str(root)])
    assert verify.exit_code == 1, verify.output
    [line] = verify.stdout.strip().splitlines()
    assert line.startswith(f"{path}: ") and says in line
    assert "Traceback" not in verify.output


def test_prune_removes_a_stale_one_without_following_it(odd: tuple[Path, Path, str]) -> None:
    root, path, _ = odd
    (root / MANIFEST).write_text(json.dumps({"schema_version": 1, "keys": []}))
    target = os.readlink(path) if path.is_symlink() else None
    stale = prune_cassette(root, dry_run=False)
    if path.is_dir() and not path.is_symlink():
        assert stale == [] and path.is_dir()  # a real folder is left for the user to look at
    else:
        assert stale == [path] and not os.path.lexists(path)
    if target == "/dev/zero":
        assert os.path.exists("/dev/zero")


def test_the_ray_keeper_never_reads_or_sends_it(odd: tuple[Path, Path, str]) -> None:
    root, path, says = odd
    info = os.stat(root)
    keeper = CassetteKeeper(str(root), "replay", (info.st_dev, info.st_ino))
    error, peak = bounded(lambda: keeper.recording(MODEL, path.stem))
    assert isinstance(error, CassetteError) and str(path) in str(error) and says in str(error)
    assert peak < MEMORY_LIMIT, peak


def test_a_link_to_a_recording_in_the_same_cassette_is_read(tmp_path: Path) -> None:
    root = tmp_path / "cassette"
    path = recorded(root)
    kept = root / "kept.json"
    path.rename(kept)
    path.symlink_to(os.path.relpath(kept, path.parent))
    answer = Cassette(root, "replay").lookup(MODEL, REQUEST, trial=0, occurrence=0)
    assert answer is not None and answer.message.content == "hello"
    assert verify_cassette(root) == []


def test_a_manifest_that_is_not_a_file_is_one_line_for_prune(tmp_path: Path) -> None:
    root = tmp_path / "cassette"
    path = recorded(root)
    (root / MANIFEST).symlink_to("/dev/zero")
    result = CliRunner().invoke(cli, ["cache", "prune", str(root)])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert MANIFEST in line and "not a regular file" in line
    assert path.exists()


def test_a_recording_is_never_written_over_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cassette"
    recorded(root)
    monkeypatch.setattr(cassette_files, "MAX_FILE_BYTES", 2000)
    big = ModelResponse(message=Message(role="assistant", content="x" * 3000))
    with pytest.raises(CassetteError, match="refusing to record: the file would be"):
        Cassette(root, "record").record(MODEL, REQUEST, big, trial=1, occurrence=0)
    monkeypatch.undo()
    assert Cassette(root, "replay").lookup(MODEL, REQUEST, trial=1, occurrence=0) is None
    assert Cassette(root, "replay").lookup(MODEL, REQUEST, trial=0, occurrence=0) is not None


def test_a_refused_recording_is_the_trial_error_even_if_the_agent_catches_it(
    tmp_path: Path,
) -> None:
    from trialkit import Suite, Task, graders, run_sync
    from trialkit.models import get_model

    model = get_model("scripted/paris")

    async def agent(prompt: str) -> str:
        try:
            answer = await model.generate(
                ModelRequest(messages=[Message(role="user", content=prompt)])
            )
        except CassetteError:
            return "Paris, whatever the cassette said"
        return str(answer.message.content)

    suite = Suite(
        id="s",
        harness=agent,
        tasks=[Task(id="t", input="Capital?", graders=[graders.contains("paris")])],
    )
    root = tmp_path / "cassette"
    assert run_sync(suite, cassette=Cassette(root, "record")).tasks[0].results[0].verdict == "pass"
    [path] = root.glob("*/*/*.json")
    path.unlink()
    path.symlink_to("/dev/zero")

    report = run_sync(suite, cassette=Cassette(root, "replay"))
    [result] = report.tasks[0].results
    assert result.verdict == "error"
    assert result.error is not None and str(path) in result.error.message
    assert "not a regular file" in result.error.message
