"""The start bound of a provider (`trialkit.sandbox._ramp`): at most `starts` sandboxes start at
once, from the option, `$TRIALKIT_SANDBOX_STARTS` or the CPU count; a bad value is one line."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from tests.sandbox._bwrap import bwrap_provider
from trialkit.sandbox._ramp import ALIVE_ENV, STARTS_ENV, StartGate, alive_bound, start_bound
from trialkit.sandbox.base import SandboxError
from trialkit.sandbox.docker import DockerProvider


def test_the_bound_comes_from_the_option_then_the_variable_then_the_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(STARTS_ENV, raising=False)
    assert start_bound("bwrap") == max(1, os.cpu_count() or 1)
    monkeypatch.setenv(STARTS_ENV, "5")
    assert start_bound("bwrap") == 5
    assert start_bound("bwrap", 3) == 3
    assert DockerProvider().options.get("starts") is None  # docker reads the same bound


@pytest.mark.parametrize("value", [0, -2, "many", 1.5, True])
def test_a_bad_bound_is_one_line_naming_where_it_came_from(
    value: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SandboxError, match=r"^sandbox 'bwrap': option starts: a whole number"):
        start_bound("bwrap", value)
    monkeypatch.setenv(STARTS_ENV, "none")
    with pytest.raises(SandboxError, match=rf"^{STARTS_ENV}: a whole number"):
        start_bound("docker")
    with pytest.raises(SandboxError, match="option starts"):
        DockerProvider(starts=0)


@pytest.mark.parametrize("bound", [1, 3])
def test_no_more_than_the_bound_start_at_once(bound: int) -> None:
    gate = StartGate(bound)
    inside = 0
    most = 0
    done = 0

    async def one() -> None:
        nonlocal inside, most, done
        async with gate.start():
            inside += 1
            most = max(most, inside)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            inside -= 1
        done += 1

    async def burst() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(one)

    anyio.run(burst)
    assert (most, done) == (bound, 12)


def test_bwrap_with_one_start_at_a_time_runs_a_burst_of_commands(tmp_path: Path) -> None:
    provider = bwrap_provider(starts=1)
    assert provider.gate.bound == 1
    policy = provider.default_policy()

    async def main() -> list[str]:
        outputs: list[str] = []
        async with provider.sandbox(tmp_path, policy) as sandbox:

            async def run(i: int) -> None:
                result = await sandbox.exec(["sh", "-c", f"echo {i}"], timeout=60)
                outputs.append(result.stdout_text.strip())

            async with anyio.create_task_group() as group:
                for i in range(6):
                    group.start_soon(run, i)
        return outputs

    assert sorted(anyio.run(main)) == [str(i) for i in range(6)]


def test_the_alive_bound_comes_from_the_option_then_the_variable_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ALIVE_ENV, raising=False)
    assert alive_bound("bwrap") is None
    assert alive_bound("docker", None, 4) == 4 * max(1, os.cpu_count() or 1)
    assert DockerProvider().living.limit == 4 * max(1, os.cpu_count() or 1)
    assert bwrap_provider().living.limit is None
    monkeypatch.setenv(ALIVE_ENV, "7")
    assert alive_bound("bwrap") == 7
    assert alive_bound("bwrap", 2) == 2
    with pytest.raises(SandboxError, match=r"^sandbox 'docker': option alive: a whole number"):
        DockerProvider(alive=0)
    monkeypatch.setenv(ALIVE_ENV, "lots")
    with pytest.raises(SandboxError, match=rf"^{ALIVE_ENV}: a whole number"):
        alive_bound("bwrap")


def test_a_trial_past_the_alive_bound_waits_for_a_sandbox_to_end(tmp_path: Path) -> None:
    provider = bwrap_provider(alive=1)
    policy = provider.default_policy()
    events: list[str] = []
    first_inside = anyio.Event()

    async def trial(name: str, hold: anyio.Event | None) -> None:
        workspace = tmp_path / name
        workspace.mkdir()
        async with provider.sandbox(workspace, policy) as sandbox:
            events.append(f"{name} in")
            if hold is not None:
                first_inside.set()
                await hold.wait()
            result = await sandbox.exec(["sh", "-c", f"echo {name}"], timeout=60)
            events.append(result.stdout_text.strip())
        events.append(f"{name} out")

    async def main() -> None:
        release = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(trial, "a", release)
            await first_inside.wait()
            group.start_soon(trial, "b", None)
            for _ in range(50):  # b gets every chance to start; it must wait, not fail
                await anyio.lowlevel.checkpoint()
            events.append("released")
            release.set()

    anyio.run(main)
    assert events == ["a in", "released", "a", "a out", "b in", "b", "b out"]
