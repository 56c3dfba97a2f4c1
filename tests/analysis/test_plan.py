"""Power: the smallest detectable change each comparison states, checked by simulation, and
`trialkit plan RUN --detect X` on a stored run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.analysis._store_runs import write_run
from trialkit.analysis.planning import detectable_trial_change, plan_comparison
from trialkit.analysis.stats import Table, stratified_exact_test
from trialkit.cli.main import cli
from trialkit.store import Store


def test_the_stated_detectable_drop_is_found_about_80_percent_of_the_time() -> None:
    """20 tasks of 10 trials at pass rates 0.6–0.95: every task loses the stated drop."""
    rng = random.Random(0)
    rates = [0.6 + 0.35 * i / 19 for i in range(20)]
    trials = 10
    expected = [Table(round(p * trials), trials, round(p * trials), trials) for p in rates]
    drop = detectable_trial_change(expected, 0.95)
    assert drop is not None and 0.05 < drop < 0.2
    found = 0
    runs = 300
    for _ in range(runs):
        tables = []
        for p in rates:
            a = sum(rng.random() < p for _ in range(trials))
            b = sum(rng.random() < p - drop for _ in range(trials))
            tables.append(Table(a, trials, b, trials))
        test = stratified_exact_test(tables)
        found += test.p_value < 0.05 and test.observed < test.expected
    assert 0.68 <= found / runs <= 0.92, found / runs


def test_a_plan_needs_more_trials_or_tasks_for_a_smaller_change() -> None:
    counts = [(4, 5), (2, 5), (3, 5), (1, 5), (4, 5)]
    coarse = plan_comparison(counts, 0.2)
    fine = plan_comparison(counts, 0.1)

    assert fine.trials_needed is not None and coarse.trials_needed is not None
    assert fine.trials_needed > coarse.trials_needed
    for wide, narrow in zip(coarse.rows, fine.rows, strict=True):
        assert narrow.tasks_for_these_tasks >= wide.tasks_for_these_tasks
        assert narrow.tasks_for_tasks_like_these >= max(6, wide.tasks_for_tasks_like_these)
    # Trials and tasks trade off for the gate: k trials on T tasks, about k·T constant.
    products = [r.trials * r.tasks_for_these_tasks for r in fine.rows]
    assert max(products) - min(products) <= max(r.trials for r in fine.rows)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/plan.db"
    with Store(url) as store:
        write_run(
            store, "readme", {"a": "PPPPF", "b": "PPFFF", "c": "PPPFF", "d": "PFFFF", "e": "PPPPF"}
        )
    return url


def test_plan_from_a_stored_run(store_url: str) -> None:
    result = CliRunner().invoke(cli, ["plan", "readme", "--detect", "10%", "--store", store_url])

    assert result.exit_code == 0, result.output
    assert "5 tasks with decided trials, 5 trials a task" in result.stdout
    assert "it detects a drop of 36.3 pts on every task" in result.stdout
    assert "70 trials a task in each run detect 10 pts" in result.stdout


def test_plan_as_json(store_url: str) -> None:
    result = CliRunner().invoke(
        cli, ["plan", "readme", "--detect", "0.2", "--format", "json", "--store", store_url]
    )

    plan = json.loads(result.stdout)
    assert (plan["detect"], plan["tasks"], plan["trials"]) == (0.2, 5, 5)
    assert [row["trials"] for row in plan["rows"]] == [1, 2, 3, 5, 10, 20]
    assert all(row["tasks_for_tasks_like_these"] >= 6 for row in plan["rows"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["readme", "--detect", "ten"], "'ten' is not a share such as 0.10 or 10%"),
        (["readme", "--detect", "0"], "'0' must lie in (0, 1]"),
        (["nope", "--detect", "0.1"], "nope"),
    ],
)
def test_bad_input_is_one_line(store_url: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["plan", *args, "--store", store_url])

    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output
