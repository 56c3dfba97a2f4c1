"""A/A through the real runner: the same stochastic agent run twice does not fail
`compare --fail-on-regression`; the same agent with one task broken does."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.store import Store
from trialkit.store.urls import sqlite_url

RATES = {f"q{i}": rate for i, rate in enumerate([0.9, 0.5, 0.7, 0.3, 0.8, 0.6, 0.95, 0.4])}


def agent(seed: int, broken: str | None = None) -> Callable[[str], str]:
    """Answers `yes` at each task's rate. The k-th answer to a task is drawn from a generator
    seeded by (seed, task), so a task's passes do not depend on the order trials ran in."""
    lock = threading.Lock()
    draws = {task: random.Random(f"{seed}-{task}") for task in RATES}

    def answer(prompt: str) -> str:
        if prompt == broken:
            return "no"
        with lock:
            draw = draws[prompt].random()
        return "yes" if draw < RATES[prompt] else "no"

    return answer


def suite(harness: Callable[[str], str]) -> Suite:
    return Suite(
        id="aa",
        kind="capability",
        trials=8,
        harness=harness,
        tasks=[Task(id=t, input=t, graders=[graders.contains("yes")]) for t in RATES],
    )


def gate(tmp_path: Path, after: Callable[[str], str]) -> int:
    url = sqlite_url(tmp_path / "aa.db")
    with Store(url) as store:
        run_sync(suite(agent(seed=1)), store=store, name="a")
        run_sync(suite(after), store=store, name="b")
    result = CliRunner().invoke(cli, ["compare", "a", "b", "--fail-on-regression", "--store", url])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code


def test_the_same_agent_run_twice_passes_the_gate(tmp_path: Path) -> None:
    assert gate(tmp_path, agent(seed=2)) == 0


def test_the_agent_with_one_task_broken_fails_it(tmp_path: Path) -> None:
    assert gate(tmp_path, agent(seed=2, broken="q6")) == 1
