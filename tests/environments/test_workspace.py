import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from trialkit import Outcome, Suite, Task, TrialContext, TrialStatus, Verdict, run_sync
from trialkit.environments.workspace import Workspace, WorkspaceError, WorkspaceWorld


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    root = tmp_path / "fixture"
    (root / "src").mkdir(parents=True)
    (root / "hello.txt").write_text("hello\nworld\n")
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "gone.txt").write_text("to be deleted\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    return root


def make(tmp_path: Path, fixture: Path | None, **kw: Any) -> Workspace:
    kw.setdefault("keep", "none")
    kw.setdefault("keep_dir", tmp_path / "kept")
    return Workspace(fixture, temp_dir=tmp_path / "tmp", **kw)


def trial(ws: Workspace, change: Callable[[Path], None]) -> tuple[WorkspaceWorld, Outcome]:
    async def go() -> tuple[WorkspaceWorld, Outcome]:
        world = await ws.setup(Task(id="t", input="x"), 0)
        outcome = Outcome()
        try:
            change(world.path)
            await ws.capture(world, outcome)
        finally:
            await ws.teardown(world)
        return world, outcome

    return anyio.run(go)


def by_path(outcome: Outcome) -> dict[str, Any]:
    assert outcome.diff is not None
    return {f.path: f for f in outcome.diff.files}


def test_text_added_modified_deleted(tmp_path: Path, fixture: Path) -> None:
    def change(root: Path) -> None:
        (root / "hello.txt").write_text("hello\nthere\n")
        (root / "src" / "new.py").write_text("x = 1")
        (root / "gone.txt").unlink()

    world, outcome = trial(make(tmp_path, fixture), change)
    assert outcome.diff is not None
    assert [f.path for f in outcome.diff.files] == ["gone.txt", "hello.txt", "src/new.py"]
    files = by_path(outcome)
    modified = files["hello.txt"]
    assert modified.change == "modified" and not modified.binary and not modified.truncated
    assert modified.diff.startswith("--- a/hello.txt\n+++ b/hello.txt\n")
    assert "-world\n" in modified.diff and "+there\n" in modified.diff
    added = files["src/new.py"]
    assert added.change == "added" and added.size == 5
    assert "--- /dev/null\n+++ b/src/new.py\n" in added.diff
    assert "+x = 1\n\\ No newline at end of file\n" in added.diff
    deleted = files["gone.txt"]
    assert deleted.change == "deleted" and deleted.size == len("to be deleted\n")
    assert "+++ /dev/null" in deleted.diff and "-to be deleted" in deleted.diff
    assert outcome.diff.added == ["src/new.py"]
    assert world.snapshot["hello.txt"].size == len("hello\nworld\n")
    assert not world.path.exists()


def test_unchanged_workspace_has_an_empty_diff(tmp_path: Path, fixture: Path) -> None:
    _, outcome = trial(make(tmp_path, fixture), lambda root: None)
    assert outcome.diff is not None and outcome.diff.files == []


def test_binary_files_have_no_diff(tmp_path: Path, fixture: Path) -> None:
    def change(root: Path) -> None:
        (root / "blob.bin").write_bytes(b"\x00\x09")
        (root / "latin1.txt").write_bytes("café".encode("latin-1"))
        (root / "hello.txt").write_bytes(b"hello\x00")

    files = by_path(trial(make(tmp_path, fixture), change)[1])
    for name in ("blob.bin", "latin1.txt", "hello.txt"):
        assert files[name].binary and files[name].diff is None, name
    assert files["latin1.txt"].change == "added" and files["latin1.txt"].size == 4


def test_large_files_are_compared_by_hash_and_noted(tmp_path: Path, fixture: Path) -> None:
    def change(root: Path) -> None:
        (root / "big.txt").write_text("x" * 500)
        (root / "hello.txt").write_text("y" * 300)

    ws = make(tmp_path, fixture, max_file_bytes=100)
    files = by_path(trial(ws, change)[1])
    big = files["big.txt"]
    assert big.truncated and big.size == 500 and not big.binary
    assert big.diff is not None and "compared by hash only" in big.diff and "xxx" not in big.diff
    assert files["hello.txt"].truncated and files["hello.txt"].change == "modified"


def test_long_diffs_are_cut(tmp_path: Path, fixture: Path) -> None:
    def change(root: Path) -> None:
        (root / "hello.txt").write_text("".join(f"line {i}\n" for i in range(1000)))

    files = by_path(trial(make(tmp_path, fixture, max_diff_bytes=300), change)[1])
    changed = files["hello.txt"]
    assert changed.truncated and changed.diff is not None
    assert len(changed.diff.encode()) < 400 and "diff truncated at 300 bytes" in changed.diff


def test_rename_is_a_deletion_and_an_addition(tmp_path: Path, fixture: Path) -> None:
    def change(root: Path) -> None:
        (root / "src" / "main.py").rename(root / "src" / "app.py")

    _, outcome = trial(make(tmp_path, fixture), change)
    assert outcome.diff is not None
    assert outcome.diff.deleted == ["src/main.py"] and outcome.diff.added == ["src/app.py"]
    assert by_path(outcome)["src/app.py"].diff == "renamed from src/main.py"


def test_fixture_symlink_outside_is_refused(tmp_path: Path, fixture: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    (fixture / "src" / "leak").symlink_to(secret)
    ws = make(tmp_path, fixture)
    with pytest.raises(WorkspaceError, match=r"src/leak.*outside the fixture"):
        anyio.run(ws.setup, Task(id="t", input="x"), 0)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_fixture_symlinks_inside_are_kept_as_symlinks(tmp_path: Path, fixture: Path) -> None:
    (fixture / "link.txt").symlink_to("hello.txt")
    (fixture / "srclink").symlink_to(fixture / "src")  # absolute, made relative in the copy
    seen: dict[str, str] = {}

    def change(root: Path) -> None:
        seen["link"] = os.readlink(root / "link.txt")
        seen["dir"] = os.readlink(root / "srclink")
        seen["via"] = (root / "srclink" / "main.py").read_text()

    world, outcome = trial(make(tmp_path, fixture), change)
    assert seen == {"link": "hello.txt", "dir": "src", "via": "print('hi')\n"}
    assert world.snapshot["link.txt"].link == "hello.txt"
    assert outcome.diff is not None and outcome.diff.files == []


def test_agent_symlink_outside_is_recorded_not_read(tmp_path: Path, fixture: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret contents")
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    (outside_dir / "data.json").write_text('{"secret": "s3cret"}')

    def change(root: Path) -> None:
        (root / "leak.txt").symlink_to(secret)
        (root / "hello.txt").unlink()
        (root / "hello.txt").symlink_to(secret)
        (root / "dir").symlink_to(outside_dir)
        (root / "ok.txt").symlink_to("src/main.py")

    ws = make(tmp_path, fixture, artifacts=["*.txt", "**/*.json"])
    _, outcome = trial(ws, change)
    files = by_path(outcome)
    for name in ("leak.txt", "hello.txt", "dir"):
        assert "refused, not read" in (files[name].diff or ""), name
    assert files["hello.txt"].change == "modified" and files["leak.txt"].change == "added"
    assert files["ok.txt"].diff == "symlink -> src/main.py"
    assert "s3cret" not in outcome.model_dump_json()
    assert [a.path for a in outcome.artifacts] == ["gone.txt", "ok.txt"]


def test_folder_removed_during_the_trial_is_an_error(tmp_path: Path, fixture: Path) -> None:
    def agent(prompt: str, ctx: TrialContext) -> str:
        import shutil

        shutil.rmtree(ctx.world.path)
        return "done"

    ws = make(tmp_path, fixture)
    report = run_sync(Suite(id="s", tasks=[Task(id="t", input="x")], harness=agent, environment=ws))
    result = report.tasks[0].results[0]
    assert result.status is TrialStatus.ERROR and result.verdict is Verdict.ERROR
    assert result.error is not None and result.error.phase == "capture"
    assert "removed during the trial" in result.error.message


def test_artifacts_by_glob(tmp_path: Path, fixture: Path) -> None:
    def change(root: Path) -> None:
        (root / "out").mkdir()
        (root / "out" / "result.json").write_text('{"ok": true}')
        (root / "out" / "img.png").write_bytes(b"\x89PNG\x00")
        (root / "out" / "huge.txt").write_text("z" * 200)

    ws = make(tmp_path, fixture, artifacts=["out/*", "**/*.json"], max_file_bytes=100)
    _, outcome = trial(ws, change)
    arts = {a.path: a for a in outcome.artifacts}
    assert list(arts) == ["out/huge.txt", "out/img.png", "out/result.json"]
    assert arts["out/result.json"].content == '{"ok": true}'
    assert arts["out/result.json"].media_type == "application/json"
    assert arts["out/img.png"].content is None and arts["out/img.png"].media_type == "image/png"
    assert arts["out/huge.txt"].content is None and arts["out/huge.txt"].size == 200


def test_state_hook_sync_and_async(tmp_path: Path, fixture: Path) -> None:
    def sync_hook(world: WorkspaceWorld) -> dict[str, Any]:
        return {"files": sorted(p.name for p in world.path.iterdir())}

    async def async_hook(world: WorkspaceWorld) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()
        return {"task": world.task_id, "n": world.trial_index}

    _, outcome = trial(make(tmp_path, fixture, state=sync_hook), lambda r: None)
    assert outcome.state == {"files": ["blob.bin", "gone.txt", "hello.txt", "src"]}
    _, outcome = trial(make(tmp_path, fixture, state=async_hook), lambda r: None)
    assert outcome.state == {"task": "t", "n": 0}


def test_state_hook_must_return_a_dict(tmp_path: Path) -> None:
    ws = make(tmp_path, None, state=lambda w: ["no"])
    with pytest.raises(TypeError, match="must return a dict"):
        trial(ws, lambda r: None)


def test_run_with_default_temp_dir_cleans_up(tmp_path: Path, fixture: Path) -> None:
    paths: list[Path] = []

    def agent(prompt: str, ctx: TrialContext) -> str:
        paths.append(ctx.world.path)
        (ctx.world.path / "hello.txt").write_text("changed\n")
        return "ok"

    ws = Workspace(fixture, keep_dir=tmp_path / "kept")
    suite = Suite(
        id="s",
        tasks=[Task(id="t", input="x", trials=2)],
        harness=agent,
        environment=ws,
        graders=[lambda c: c.outcome.diff is not None and c.outcome.diff.modified == ["hello.txt"]],
    )
    report = run_sync(suite)
    assert report.tasks[0].verdict is Verdict.PASS
    assert len(paths) == 2 and len(set(paths)) == 2
    for p in paths:
        assert p.name.startswith("trialkit-") and not p.exists()
    assert not (tmp_path / "kept").exists()
    assert (fixture / "hello.txt").read_text() == "hello\nworld\n"


def test_keep_all_keeps_under_keep_dir(tmp_path: Path, fixture: Path) -> None:
    def agent(prompt: str, ctx: TrialContext) -> str:
        (ctx.world.path / "made.txt").write_text("by the agent")
        return "ok"

    ws = make(tmp_path, fixture, keep="all")
    suite = Suite(id="s", tasks=[Task(id="a b", input="x")], harness=agent, environment=ws)
    run_sync(suite)
    kept = list((tmp_path / "kept").glob("*/*"))
    assert [p.name for p in kept] == ["a_b#0"]
    assert (kept[0] / "made.txt").read_text() == "by the agent"
    assert list((tmp_path / "tmp").iterdir()) == []


def test_keep_failing(tmp_path: Path, fixture: Path) -> None:
    def agent(prompt: str, ctx: TrialContext) -> str:
        raise RuntimeError("boom")

    ws = make(tmp_path, fixture, keep="failing")
    run_sync(Suite(id="s", tasks=[Task(id="t", input="x")], harness=agent, environment=ws))
    assert [p.name for p in (tmp_path / "kept").glob("*/*")] == ["t#0"]

    async def with_verdict(verdict: Verdict) -> WorkspaceWorld:
        world = await ws.setup(Task(id="v", input="x"), 1)
        await ws.capture(world, Outcome())
        ws.keep_for(world, verdict, run_id="run-1")
        await ws.teardown(world)
        return world

    passed = anyio.run(with_verdict, Verdict.PASS)
    assert passed.kept_at is None and not passed.path.exists()
    failed = anyio.run(with_verdict, Verdict.FAIL)
    assert failed.kept_at == tmp_path / "kept" / "run-1" / "v#1" and failed.kept_at.is_dir()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_empty_and_missing_fixture(tmp_path: Path) -> None:
    def change(root: Path) -> None:
        (root / "a.txt").write_text("a\n")

    world, outcome = trial(make(tmp_path, None), change)
    assert world.snapshot == {} and by_path(outcome)["a.txt"].change == "added"
    ws = make(tmp_path, tmp_path / "nope")
    with pytest.raises(WorkspaceError, match=r"nope.*does not exist"):
        anyio.run(ws.setup, Task(id="t", input="x"), 0)


def test_ignored_paths(tmp_path: Path, fixture: Path) -> None:
    (fixture / ".git").mkdir()
    (fixture / ".git" / "HEAD").write_text("ref\n")

    def change(root: Path) -> None:
        assert (root / ".git" / "HEAD").exists()  # copied, just not diffed
        (root / ".git" / "HEAD").write_text("other\n")
        (root / "src" / "__pycache__").mkdir()
        (root / "src" / "__pycache__" / "main.pyc").write_bytes(b"\x00")

    _, outcome = trial(make(tmp_path, fixture), change)
    assert outcome.diff is not None and outcome.diff.files == []


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="keep"):
        Workspace(keep="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Workspace(artifacts="*.txt")
