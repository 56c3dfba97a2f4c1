"""The start bound of a provider (`trialkit.sandbox._ramp`): at most `starts` sandboxes start at
once, from the option, `$TRIALKIT_SANDBOX_STARTS` or the CPU count; a bad value is one line."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from tests.sandbox._bwrap import bwrap_provider
from trialkit.sandbox._ramp import STARTS_ENV, StartGate, start_bound
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
