"""A run raises the garbage collector's thresholds while it goes, and puts them back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import anyio
import pytest

from trialkit import Suite, Task, run_sync
from trialkit._gc import RUN_THRESHOLDS, fewer_collections


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_a_run_raises_the_thresholds_and_puts_them_back() -> None:
    seen: list[tuple[int, int, int]] = []

    def agent(prompt: str) -> str:
        seen.append(gc.get_threshold())
        return prompt

    run_sync(Suite(id="s", harness=agent, trials=2, tasks=[Task(id="t", input="x")]))
    assert seen == [RUN_THRESHOLDS, RUN_THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10)


def test_concurrent_runs_restore_once_the_last_ends() -> None:
    async def main() -> list[tuple[int, int, int]]:
        inside: list[tuple[int, int, int]] = []
        first_done = anyio.Event()

        async def first() -> None:
            with fewer_collections():
                await anyio.sleep(0.01)
            first_done.set()

        async def second() -> None:
            with fewer_collections():
                await first_done.wait()
                inside.append(gc.get_threshold())  # the first ended; this one still runs

        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            tg.start_soon(first)
        return inside

    assert anyio.run(main) == [RUN_THRESHOLDS]
    assert gc.get_threshold() == (700, 10, 10)


def test_thresholds_already_higher_or_collection_off_are_left_alone() -> None:
    gc.set_threshold(100_000, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (100_000, 10, 10)
    gc.set_threshold(0, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)
