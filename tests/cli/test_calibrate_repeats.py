"""`trialkit calibrate` gives a repeated judge's flip rate and agreement next to its figures
against human labels."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.graders.test_judge_repeats import RUBRIC, wobbly_judge
from trialkit import Suite, Task, run_sync
from trialkit.cli.calibrate import calibrate_command
from trialkit.graders.judge import judge
from trialkit.models import ScriptedModel
from trialkit.store import Store


def test_calibrate_gives_the_flip_rate_of_a_repeated_judge(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    model = ScriptedModel("judge", wobbly_judge())
    suite = Suite(
        id="calibration",
        trials=2,
        harness=lambda prompt: "Paris." if prompt == "france" else "Lyon.",
        tasks=[
            Task(id=name, input=name, graders=[judge(RUBRIC, model=model, repeats=3, name="j")])
            for name in ("france", "lyon")
        ],
    )
    with Store(url) as store:
        run_id = run_sync(suite, store=store).run.id
    labels = tmp_path / "labels.jsonl"
    rows = [
        {"run_id": run_id, "task_id": task, "trial": index, "verdict": verdict}
        for task, verdict in (("france", "pass"), ("lyon", "fail"))
        for index in (0, 1)
    ]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    result = CliRunner().invoke(calibrate_command, ["--labels", str(labels), "--store", url])
    assert result.exit_code == 0, result.output
    assert (
        "consistency: j: asked 3 times per output; verdicts flipped on 2 of 4 outputs (50.0%), "
        "answers agree 66.7%" in result.stdout.splitlines()
    )
    out = tmp_path / "calibration.json"
    result = CliRunner().invoke(
        calibrate_command, ["--labels", str(labels), "--store", url, "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(out.read_text(encoding="utf-8"))["consistency"]
    assert (shown["grader"], shown["rubric"], shown["judged"], shown["flipped"]) == (
        "j",
        RUBRIC,
        4,
        2,
    )
    assert shown["flip_rate"] == 0.5
