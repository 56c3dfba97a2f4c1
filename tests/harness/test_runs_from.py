"""Where a command-line agent runs from (`trialkit.harness._runs_from`), and how the presets hand
it to a sandbox (`SubprocessAgent.in_sandbox`): its installation and interpreter bound in
read-only, Codex's own sandbox off only inside one that isolates."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.sandbox._bwrap import bwrap_provider
from trialkit.harness import SubprocessAgent
from trialkit.harness._runs_from import runs_from


def _script(path: Path, first_line: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{first_line}\necho hi\n")
    path.chmod(0o755)
    return path


def test_an_npm_package_is_bound_from_its_outermost_node_modules_with_its_interpreter(
    tmp_path: Path,
) -> None:
    modules = tmp_path / "prefix" / "node_modules"
    _script(modules / "@scope" / "agent" / "bin" / "agent.js", "#!/usr/bin/env sh")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "agent").symlink_to("../@scope/agent/bin/agent.js")
    found, paths = runs_from(str(modules / ".bin" / "agent"))
    assert found == str(modules / ".bin" / "agent")
    shell = shutil.which("sh")
    assert shell is not None
    assert paths[0] == str(modules)
    assert os.path.abspath(shell) in paths


def test_a_program_of_a_virtual_environment_binds_the_environment(tmp_path: Path) -> None:
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    program = _script(tmp_path / "venv" / "bin" / "agent", "#!/bin/sh")
    found, paths = runs_from(str(program))
    assert found == str(program)
    assert paths[0] == str(tmp_path / "venv")
    assert "/bin/sh" in paths


def test_a_program_on_path_is_resolved_and_a_missing_one_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = _script(tmp_path / "tools" / "agent", "#!/bin/sh")
    monkeypatch.setenv("PATH", f"{tmp_path / 'tools'}{os.pathsep}{os.environ['PATH']}")
    found, paths = runs_from("agent")
    assert found == str(program)
    assert paths[:2] == (str(tmp_path / "tools"), "/bin/sh")  # then /bin/sh's real path
    assert runs_from("no-such-agent-here") == ("no-such-agent-here", ())
    # a program of the system that is no script needs nothing bound
    assert runs_from("/usr/bin/env") == ("/usr/bin/env", ())


def test_presets_declare_their_installation_and_bwrap_binds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap_provider()  # a skip without bubblewrap (a failure under TRIALKIT_REQUIRE_BWRAP=1)
    modules = tmp_path / "node_modules"
    _script(modules / "codex-pkg" / "bin" / "codex.js", "#!/bin/sh")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "codex").symlink_to("../codex-pkg/bin/codex.js")
    monkeypatch.setenv("PATH", f"{modules / '.bin'}{os.pathsep}{os.environ['PATH']}")
    agent = SubprocessAgent.codex(model="gpt-5.5")
    assert agent.runs_from[:2] == (str(modules), "/bin/sh")
    assert agent.command[0] == "codex"
    assert agent.command[4:6] == ["-s", "workspace-write"]
    agent.in_sandbox("bwrap", read_only=["/opt"])
    provider = agent.sandbox_provider
    assert provider is not None
    assert provider.options["read_only"] == ["/opt", *agent.runs_from]
    # its own sandbox cannot nest in bwrap: trialkit's keeps it to the workspace there
    assert agent.command[0] == str(modules / ".bin" / "codex")
    assert agent.command[4:6] == ["-s", "danger-full-access"]


def test_outside_a_sandbox_that_isolates_codex_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = SubprocessAgent.codex(model="gpt-5.5", executable="codex")
    agent.in_sandbox("local")
    assert agent.command[4:6] == ["-s", "workspace-write"]
    provider = agent.sandbox_provider
    assert provider is not None and "read_only" not in provider.options
    read_only = SubprocessAgent.codex(sandbox="read-only")
    assert read_only.boxed_command is None  # what it asks is kept, in any sandbox
    assert SubprocessAgent.claude_code().boxed_command is None
