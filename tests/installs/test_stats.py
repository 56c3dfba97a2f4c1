"""`pip install 'trialkit[stats]'` alone: `trialkit calibrate` measures a grader against human
labels (Cohen's kappa), `trialkit agreement` gives Krippendorff's alpha, and `trialkit
compare` has every statistic (none says it needs the extra)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.installs.helpers import said, trialkit

INSTALL = "stats"

SUITE = """
from trialkit import Suite, Task, graders

COUNTRIES = ["France", "Italy", "Spain", "Germany"]


def agent(prompt: str) -> str:
    return "Paris" if "France" in prompt or "Italy" in prompt else "Berlin"


suite = Suite(
    id="capitals",
    trials=1,
    harness=agent,
    graders=[graders.contains("paris")],
    tasks=[Task(id=c.lower(), input=f"Capital of {c}?") for c in COUNTRIES],
)
"""
HUMAN = {"france": "pass", "italy": "fail", "spain": "fail", "germany": "fail"}
"""The grader says pass, pass, fail, fail: 3 of 4 agree, Cohen's kappa 0.5."""


def run(folder: Path) -> str:
    done = trialkit("run", "capitals.py", "--json", "report.json", cwd=folder)
    assert done.returncode == 0, said(done)
    return str(json.loads((folder / "report.json").read_text())["run"]["id"])


def test_calibrate_and_agreement_against_human_labels(tmp_path: Path) -> None:
    (tmp_path / "capitals.py").write_text(SUITE, encoding="utf-8")
    run_id = run(tmp_path)
    rows = [
        {"run_id": run_id, "task_id": task, "trial": 0, "grader": "contains('paris')",
         "verdict": verdict, "reviewer": "ana"}
        for task, verdict in HUMAN.items()
    ]  # fmt: skip
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    done = trialkit("calibrate", "--labels", "labels.jsonl", "--json", "cal.json", cwd=tmp_path)
    assert done.returncode == 0, said(done)
    figures = json.loads((tmp_path / "cal.json").read_text())
    assert figures["kappa"]["value"] == 0.5, figures
    assert figures["agreement"]["value"] == 0.75, figures

    done = trialkit(
        "agreement",
        run_id,
        "--labels",
        "labels.jsonl",
        "--grader",
        "contains('paris')",
        cwd=tmp_path,
    )
    assert done.returncode == 0, said(done)
    assert "alpha" in done.stdout.lower(), said(done)


def test_compare_has_all_its_statistics(tmp_path: Path) -> None:
    (tmp_path / "capitals.py").write_text(SUITE, encoding="utf-8")
    first, second = run(tmp_path), run(tmp_path)
    done = trialkit("compare", first, second, cwd=tmp_path)
    assert done.returncode == 0, said(done)
    assert "trialkit[stats]" not in done.stdout + done.stderr, said(done)
