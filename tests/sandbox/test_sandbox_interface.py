"""The sandbox interface: policies, refusals before any trial, providers by name, and the
`local` provider (no isolation) through `exec` and the file calls."""

from __future__ import annotations

import os
from importlib.metadata import EntryPoint
from pathlib import Path

import anyio
import pytest

from trialkit.sandbox import registry
from trialkit.sandbox.base import (
    ExecResult,
    LimitExceeded,
    Limits,
    NetworkPolicy,
    PolicyRefused,
    SandboxError,
    SandboxPolicy,
    refusal,
)
from trialkit.sandbox.local import LocalProvider


def test_limits_and_network_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="memory_bytes must be a whole number > 0"):
        Limits(memory_bytes=0)
    with pytest.raises(ValueError, match="cpu_seconds must be a number of seconds > 0"):
        Limits(cpu_seconds=float("inf"))
    with pytest.raises(ValueError, match="processes must be a whole number > 0, got True"):
        Limits(processes=True)
    with pytest.raises(ValueError, match="wall_clock_seconds must be a number"):
        Limits(wall_clock_seconds=False)
    with pytest.raises(ValueError, match="network: one of none, model-only, allowlist, host"):
        NetworkPolicy("internet")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allow is for mode allowlist"):
        NetworkPolicy("none", allow=("example.com",))


def test_limits_asked_names_each_limit_set() -> None:
    limits = Limits(memory_bytes=1, processes=2, cpu_seconds=3, output_bytes=None, disk_bytes=4)
    assert limits.asked() == {"memory", "processes", "cpu_time", "disk"}
    assert Limits().asked() == {"output"}


def test_a_policy_the_provider_cannot_enforce_is_refused_in_one_line() -> None:
    local = LocalProvider()
    policy = SandboxPolicy(
        provider="local",
        network=NetworkPolicy("none"),
        grader_network=NetworkPolicy("host"),
        limits=Limits(memory_bytes=1 << 20, processes=10),
        user="1000",
    )
    line = refusal("local", local.capabilities(), policy)
    assert line is not None and "\n" not in line
    assert "network 'none' (agent)" in line
    assert "limit 'memory'" in line and "limit 'processes'" in line and "user" in line
    assert "(grader)" not in line  # host is what local does
    with pytest.raises(PolicyRefused, match="sandbox 'local' cannot enforce"):
        local.check(policy)
    local.check(local.default_policy())  # its own default it enforces


def test_images_are_refused_where_the_provider_runs_none() -> None:
    local = LocalProvider()
    policy = local.default_policy()
    assert refusal("local", local.capabilities(), policy) is None
    image = SandboxPolicy("local", NetworkPolicy("host"), NetworkPolicy("host"), image="debian")
    assert "images" in (refusal("local", local.capabilities(), image) or "")


def test_unknown_provider_names_the_known_ones_and_a_close_match() -> None:
    with pytest.raises(SandboxError) as caught:
        registry.load_provider("bwarp")
    message = str(caught.value)
    assert "no sandbox provider 'bwarp'" in message
    assert "did you mean 'bwrap'?" in message
    assert "local" in message


def test_a_provider_declared_by_another_package_is_found_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    point = EntryPoint("plain", "trialkit.sandbox.local:LocalProvider", registry.ENTRY_POINT_GROUP)
    bad = EntryPoint("broken", "trialkit.sandbox.base:ExecResult", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point, bad])
    assert {"plain", "broken", "local", "bwrap"} <= set(registry.provider_names())
    provider = registry.load_provider("plain", clear_env=True)
    assert isinstance(provider, LocalProvider) and provider.options == {"clear_env": True}
    with pytest.raises(SandboxError, match="is not a SandboxProvider class"):
        registry.load_provider("broken")


def test_an_exec_result_that_hit_a_limit_raises_naming_it() -> None:
    fine = ExecResult(returncode=0, stdout=b"", stderr=b"")
    assert fine.raise_for_limit() is fine and fine.success
    hit = ExecResult(returncode=-9, stdout=b"", stderr=b"", limit="memory")
    assert not hit.success
    with pytest.raises(LimitExceeded, match="memory") as caught:
        hit.raise_for_limit()
    assert caught.value.limit == "memory" and caught.value.result is hit


def _local(tmp_path: Path, **limits: int | float | None) -> tuple[LocalProvider, SandboxPolicy]:
    provider = LocalProvider()
    policy = provider.default_policy()
    return provider, SandboxPolicy(
        "local",
        policy.network,
        policy.grader_network,
        limits=Limits(**limits),  # type: ignore[arg-type]
    )


def test_local_exec_runs_in_the_workspace_with_input_and_both_outputs(tmp_path: Path) -> None:
    provider, policy = _local(tmp_path)

    async def main() -> ExecResult:
        async with provider.sandbox(tmp_path, policy) as sandbox:
            return await sandbox.exec(
                ["sh", "-c", 'pwd; cat; echo "$EXTRA" >&2; exit 3'], input="fed", env={"EXTRA": "e"}
            )

    result = anyio.run(main)
    assert result.returncode == 3 and result.limit is None
    assert result.stdout_text == f"{os.path.realpath(tmp_path)}\nfed"
    assert result.stderr_text == "e\n"


def test_local_exec_stops_a_command_at_its_output_cap_and_its_wall_clock(tmp_path: Path) -> None:
    provider, policy = _local(tmp_path, output_bytes=5000)

    async def main() -> tuple[ExecResult, ExecResult]:
        async with provider.sandbox(tmp_path, policy) as sandbox:
            loud = await sandbox.exec(["yes"])
            slow = await sandbox.exec(["sleep", "30"], timeout=0.2)
            return loud, slow

    loud, slow = anyio.run(main)
    assert loud.limit == "output" and loud.stdout_truncated and len(loud.stdout) == 5000
    assert loud.returncode < 0  # stopped, not ended by itself
    assert slow.limit == "wall_clock" and slow.returncode < 0


def test_local_files_and_folders_in_and_out(tmp_path: Path) -> None:
    provider, policy = _local(tmp_path)
    workspace, source, back = tmp_path / "ws", tmp_path / "src", tmp_path / "back"
    workspace.mkdir()
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "f.txt").write_text("inside")

    async def main() -> bytes:
        async with provider.sandbox(workspace, policy) as sandbox:
            await sandbox.write_file("notes/a.txt", "written")
            await sandbox.copy_in(source, "copied")
            await sandbox.copy_out("copied", back)
            return await sandbox.read_file("notes/a.txt")

    assert anyio.run(main) == b"written"
    assert (workspace / "copied" / "deep" / "f.txt").read_text() == "inside"
    assert (back / "deep" / "f.txt").read_text() == "inside"


def test_local_refuses_another_user(tmp_path: Path) -> None:
    provider, policy = _local(tmp_path)

    async def main() -> None:
        async with provider.sandbox(tmp_path, policy) as sandbox:
            await sandbox.exec(["true"], user="nobody")

    with pytest.raises(SandboxError, match="cannot run processes as another user"):
        anyio.run(main)


def test_a_provider_refuses_an_option_it_does_not_have() -> None:
    with pytest.raises(SandboxError, match="sandbox 'local': no option clearenv"):
        registry.load_provider("local", clearenv=True)
    with pytest.raises(SandboxError, match="clear_env: true or false, got 'yes'"):
        registry.load_provider("local", clear_env="yes")
    with pytest.raises(SandboxError, match="sandbox 'bwrap': no option readonly"):
        registry.load_provider("bwrap", readonly=["/opt"])
