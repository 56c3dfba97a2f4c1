"""`trialkit compare --fail-on-regression` on stored runs: the required outcomes of the gate
(the exact stratified test over tasks, trials as units), and every place that concludes
agreeing with the exit code and naming the tasks left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.analysis._store_runs import write_run
from trialkit.cli.main import cli
from trialkit.store import Store
from trialkit.task import SuiteKind

# The 13-task regression of issue 33: six tasks go from 4/4 to 0/4, two drop one trial, two
# are fixed, one errors, two are unchanged. McNemar on the verdicts gives p = 0.11.
REGRESSION_A = (
    {f"gone{i}": "PPPP" for i in range(6)}
    | {"drop0": "PPPP", "drop1": "PPPP", "fix0": "PPPF", "fix1": "PPPF", "crash": "PPPP"}
    | {"same0": "PPPP", "same1": "PPPP"}
)
REGRESSION_B = (
    {f"gone{i}": "FFFF" for i in range(6)}
    | {"drop0": "PPPF", "drop1": "PPPF", "fix0": "PPPP", "fix1": "PPPP", "crash": "EEEE"}
    | {"same0": "PPPP", "same1": "PPPP"}
)


def stored(tmp_path: Path, *runs: dict[str, str], kind: SuiteKind = SuiteKind.REGRESSION) -> str:
    url = f"sqlite:///{tmp_path}/gate.db"
    with Store(url) as store:
        for i, tasks in enumerate(runs):
            write_run(store, f"run{i}", tasks, hours=i, kind=kind)
    return url


def gate(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["compare", *args, "--fail-on-regression", "--store", url])
    return result.exit_code, result.stdout, result.stderr


def test_the_13_task_regression_exits_1(tmp_path: Path) -> None:
    url = stored(tmp_path, REGRESSION_A, REGRESSION_B)

    code, out, err = gate(url, "run0", "run1", "--format", "json")

    assert code == 1, out + err
    pair = json.loads(out)["pairs"][0]
    assert pair["outcome"] == "worse"
    assert pair["mcnemar_p_value"] == pytest.approx(0.109375)  # the verdicts alone: p = 0.11
    assert pair["trial_test"]["p_value"] < 1e-6
    assert pair["conclusion"].startswith("B is worse than A on these tasks")
    assert (
        "Not compared: crash (pass 4/4 in A, error (4 trials errored) in B)."
        in (pair["conclusion"])
    )
    assert "regression: run B is significantly worse than run A" in err


def test_the_13_task_regression_exits_1_with_three_runs(tmp_path: Path) -> None:
    url = stored(tmp_path, REGRESSION_A, REGRESSION_B, REGRESSION_B)

    code, out, err = gate(url, "run0", "run1", "run2", "--format", "json")

    assert code == 1, out + err
    assert [p["outcome"] for p in json.loads(out)["pairs"]] == ["worse", "worse"]
    assert "run B, C is significantly worse" in err


def test_a_4_task_suite_from_12_of_12_to_0_of_12_exits_1(tmp_path: Path) -> None:
    url = stored(
        tmp_path,
        {f"t{i}": "PPP" for i in range(4)},
        {f"t{i}": "FFF" for i in range(4)},
        kind=SuiteKind.CAPABILITY,
    )

    code, out, _ = gate(url, "run0", "run1", "--format", "json")

    assert code == 1
    pair = json.loads(out)["pairs"][0]
    assert pair["trial_test"]["p_value"] == pytest.approx(2 * (1 / 20) ** 4)
    # The other question cannot be answered with 4 tasks, and says so; it does not decide.
    assert pair["suite_outcome"] == "too_few_tasks"
    assert "too few tasks to tell" in pair["suite_conclusion"]


def test_one_task_from_4_of_4_to_2_of_4_among_unchanged_tasks_exits_0(tmp_path: Path) -> None:
    same = {f"u{i}": "PPPP" for i in range(9)} | {"flaky0": "PPFF", "flaky1": "PFPF"}
    url = stored(tmp_path, same | {"t": "PPPP"}, same | {"t": "PPFF"})

    code, out, _ = gate(url, "run0", "run1", "--format", "json")

    assert code == 0
    pair = json.loads(out)["pairs"][0]
    assert pair["outcome"] == "no_difference"
    assert pair["new_failures"] == ["t"]
    assert pair["conclusion"].startswith("No significant change from A to B on these tasks")
    assert "1 new failure (t)" in pair["conclusion"]


def test_one_task_from_1_of_1_to_0_of_1_exits_0(tmp_path: Path) -> None:
    url = stored(tmp_path, {"t": "P", "u": "P"}, {"t": "F", "u": "P"})

    code, out, _ = gate(url, "run0", "run1", "--format", "json")

    assert code == 0
    assert json.loads(out)["pairs"][0]["trial_test"]["p_value"] == 1.0


def test_an_improvement_does_not_fail_the_gate(tmp_path: Path) -> None:
    url = stored(tmp_path, REGRESSION_B, REGRESSION_A)

    code, out, _ = gate(url, "run0", "run1", "--format", "json")

    assert code == 0
    assert json.loads(out)["pairs"][0]["outcome"] == "better"


# -- nothing hidden, nothing contradictory -------------------------------------------------------

# The viewer's case of issue 33: lantern-refund is unknown in A (its trials wait for a human
# reviewer, so none is decided) and fails 0/3 in B; every other task is unchanged.
LANTERN_A = {f"t{i}": "PPP" for i in range(9)} | {"flaky": "PPF", "lantern-refund": "UUU"}
LANTERN_B = {f"t{i}": "PPP" for i in range(9)} | {"flaky": "PPF", "lantern-refund": "FFF"}
LEFT_OUT = "lantern-refund (unknown (3 trials unknown) in A, fail 0/3 in B)"


@pytest.mark.parametrize("fmt", ["table", "md", "github", "json"])
def test_a_task_left_out_is_named_in_every_format(tmp_path: Path, fmt: str) -> None:
    url = stored(tmp_path, LANTERN_A, LANTERN_B)

    code, out, _ = gate(url, "run0", "run1", "--format", fmt)

    assert code == 0
    flat = " ".join(out.split())
    assert "lantern-refund" in flat
    assert "fail 0/3 in B" in flat
    assert "same tasks" not in flat


def test_the_conclusion_names_the_task_left_out(tmp_path: Path) -> None:
    url = stored(tmp_path, LANTERN_A, LANTERN_B)

    _, out, _ = gate(url, "run0", "run1", "--format", "json")

    pair = json.loads(out)["pairs"][0]
    assert pair["left_out"] == [
        {"id": "lantern-refund", "reason": "unknown (3 trials unknown) in A, fail 0/3 in B"}
    ]
    assert pair["conclusion"] == (
        "No significant change from A to B on these tasks: 2 of B's trials passed where 2.0 "
        "were expected if nothing changed (exact stratified test over 1 task, p = 1); it could "
        "detect a change of 25 pts on every task at 80% power. Not compared: "
        + LEFT_OUT
        + ". No task changed verdict among the 10 tasks decided in both runs; no single task "
        "changed significantly on its own (Fisher's exact test, Holm-adjusted over 1 task)."
    )


@pytest.mark.parametrize(
    ("runs", "code"),
    [((REGRESSION_A, REGRESSION_B), 1), ((LANTERN_A, LANTERN_B), 0), ((LANTERN_A, LANTERN_A), 0)],
)
def test_every_format_leads_with_what_the_exit_code_says(
    tmp_path: Path, runs: tuple[dict[str, str], dict[str, str]], code: int
) -> None:
    url = stored(tmp_path, *runs)
    worse = code == 1
    for fmt in ("table", "md", "github"):
        exit_code, out, _ = gate(url, "run0", "run1", "--format", fmt)
        flat = " ".join(out.split())
        assert exit_code == code
        assert ("B is worse than A on these tasks" in flat) is worse, fmt
        assert ("cannot tell" in flat) is False, fmt
        if fmt == "github":
            assert out.splitlines()[1].startswith("❌" if worse else "➖"), out
