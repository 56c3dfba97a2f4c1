"""Where a workspace is made: never below a folder holding `.git` it did not choose (a stray
`/tmp/.git` made Claude Code, which looks upward for a repository, believe it was in one)."""

import tempfile
from pathlib import Path

import anyio
import pytest

from trialkit import Task
from trialkit.environments import workspace as workspace_module
from trialkit.environments.workspace import Workspace


def made_in(ws: Workspace) -> Path:
    async def go() -> Path:
        world = await ws.setup(Task(id="t", input="x"), 0)
        try:
            assert (world.path / "a.txt").read_text() == "a"
            return world.path
        finally:
            await ws.teardown(world)

    return anyio.run(go)


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    (tmp_path / "fixture").mkdir()
    (tmp_path / "fixture" / "a.txt").write_text("a")
    return tmp_path / "fixture"


@pytest.fixture
def system_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "system" / "tmp"
    folder.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def outside_repositories(path: Path) -> bool:
    return not any((p / ".git").exists() for p in path.parents)


def test_a_clean_temp_folder_is_used(fixture: Path, system_tmp: Path) -> None:
    path = made_in(Workspace(fixture, keep="none"))
    assert path.parent == system_tmp and not path.exists()


@pytest.mark.parametrize("where", [".", ".."])  # in the temp folder, or a folder above it
@pytest.mark.parametrize("kind", ["folder", "file"])  # a repository, or a worktree's pointer
def test_a_git_above_the_temp_folder_moves_the_workspace_out_of_it(
    fixture: Path, system_tmp: Path, where: str, kind: str
) -> None:
    stray = (system_tmp / where / ".git").resolve()
    stray.mkdir() if kind == "folder" else stray.write_text("gitdir: /nowhere\n")
    path = made_in(Workspace(fixture, keep="none"))
    assert not path.is_relative_to(system_tmp)
    assert outside_repositories(path), path
    assert str(path.parent) in workspace_module.TEMP_BASES


def test_a_temp_dir_the_suite_names_is_used_as_it_is(fixture: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "repo" / "work"
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    path = made_in(Workspace(fixture, keep="none", temp_dir=chosen))
    assert path.parent == chosen
