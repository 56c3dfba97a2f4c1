"""`trialkit health` flags a judge whose verdicts flip on identical input more than a set
share of the outputs (`--max-judge-flips`, default 10%), over the suite's runs."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.graders.test_judge_repeats import RUBRIC, said, wobbly_judge
from trialkit import Suite, Task, run_sync
from trialkit.analysis.health import DEFAULT_MAX_JUDGE_FLIPS
from trialkit.cli.main import cli
from trialkit.graders.judge import judge
from trialkit.models import ScriptedModel
from trialkit.store import Store


def make_suite() -> Suite:
    wobbly = ScriptedModel("judge", wobbly_judge())
    steady = ScriptedModel("steady", lambda request, trial: said(1))
    return Suite(
        id="judged",
        trials=2,
        harness=lambda prompt: "Paris." if prompt == "france" else "Lyon.",
        tasks=[
            Task(
                id=name,
                input=name,
                graders=[
                    judge(RUBRIC, model=wobbly, repeats=3, name="wobbly"),
                    judge("Says something.", model=steady, repeats=2, name="steady"),
                ],
            )
            for name in ("france", "lyon")
        ],
    )


def health(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["health", *args, "--store", url])
    return result.exit_code, result.stdout


def test_health_flags_the_judge_that_flips(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url) as store:
        for _ in range(2):
            run_sync(make_suite(), store=store)

    code, out = health(url, "--format", "json")
    assert code == 0
    found = json.loads(out)
    assert found["max_judge_flips"] == DEFAULT_MAX_JUDGE_FLIPS == 0.1
    assert found["flipping_judges"] == ["wobbly"]
    by_name = {j["grader"]: j for j in found["judges"]}
    # Two runs: lyon's 2 trials flip in each, france's never.
    assert (by_name["wobbly"]["judged"], by_name["wobbly"]["flipped"]) == (8, 4)
    assert (by_name["steady"]["flip_rate"], by_name["steady"]["agreement"]) == (0.0, 1.0)

    code, out = health(url, "--format", "md")
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.startswith("| Judge consistency |")]
    assert "1 over 10.0% of outputs flipped; FLIPS: wobbly: asked 3 times per output" in row
    assert "verdicts flipped on 4 of 8 outputs (50.0%)" in row

    code, out = health(url, "--format", "json", "--max-judge-flips", "0.5")
    assert json.loads(out)["flipping_judges"] == []  # 50% is not over 50%
    code, out = health(url, "--max-judge-flips", "1.5")
    assert code == 2


def test_no_judge_row_without_repeated_judges(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url) as store:
        run_sync(
            Suite(id="plain", harness=lambda p: "x", tasks=[Task(id="t", input="q")]),
            store=store,
        )
    code, out = health(url, "--format", "md")
    assert code == 0 and "Judge consistency" not in out
    assert json.loads(health(url, "--format", "json")[1])["judges"] == []
