"""`pip install 'trialkit[hf]'` alone: a small local dataset file read with Hugging Face
`datasets`, offline, from Python (`load_hf_dataset`) and from the command line
(`trialkit run hf:PATH`)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.installs.helpers import said, trialkit
from trialkit import run_sync
from trialkit.loaders.importers import load_hf_dataset

INSTALL = "hf"

ROWS = [
    {"id": "fr", "question": "Say Paris", "answer": "paris", "level": "easy"},
    {"id": "es", "question": "Say Madrid", "answer": "madrid", "level": "easy"},
    {"id": "xx", "question": "Say nothing", "answer": "tokyo", "level": "hard"},
]


def write_dataset(folder: Path) -> tuple[Path, Path]:
    jsonl = folder / "capitals.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    csv = folder / "capitals.csv"
    lines = ["id,question,answer,level", *(",".join(r.values()) for r in ROWS)]
    csv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return jsonl, csv


def test_a_local_dataset_file_becomes_a_suite(tmp_path: Path) -> None:
    jsonl, csv = write_dataset(tmp_path)
    for path in (jsonl, csv):
        suite = load_hf_dataset(
            path, input_field="question", target_field="answer", model="scripted/echo"
        )
        assert [t.id for t in suite.tasks] == ["fr", "es", "xx"]
        assert suite.tasks[2].metadata["level"] == "hard"
        report = run_sync(suite)  # scripted/echo says the question back
        assert [t.verdict for t in report.tasks] == ["pass", "pass", "fail"]


def test_trialkit_run_of_an_hf_file(tmp_path: Path) -> None:
    write_dataset(tmp_path)
    rows = "".join(json.dumps({"input": r["question"], "target": r["answer"]}) + "\n" for r in ROWS)
    (tmp_path / "plain.jsonl").write_text(rows, encoding="utf-8")
    done = trialkit(
        "run", "hf:plain.jsonl", "--model", "scripted/echo", "--json", "report.json", cwd=tmp_path
    )
    assert done.returncode == 0, said(done)
    summary = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert (summary["tasks"], summary["passed_tasks"]) == (3, 2)
