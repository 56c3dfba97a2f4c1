"""Every report format states the gate's verdict, all its reasons, the exit code, and whether
the model calls were live, recorded or replayed; a report written later says the same."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml

from trialkit.cli.main import cli

SUITE = """\
from trialkit import Suite, Task, graders


def agent(prompt: str) -> str:
    if prompt == "crash":
        raise RuntimeError("the agent fell over")
    return prompt


regression = Suite(
    id="gated",
    kind="regression",
    trials=2,
    harness=agent,
    tasks=[
        Task(id="ok", input="hello", graders=[graders.contains("hello")]),
        Task(id="wrong", input="hello", graders=[graders.contains("goodbye")]),
        Task(id="crash", input="crash", graders=[graders.contains("x")]),
    ],
)
chat = Suite(id="chat", model="scripted/echo", trials=2,
             tasks=[Task(id="hi", input="hi", graders=[graders.contains("hi")])])
"""

BOTH = ["2 of 6 trials errored (allowed: none)", "regression tasks did not pass: wrong"]


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_text(path: Path) -> str:
    parser = _Text()
    parser.feed(path.read_text(encoding="utf-8"))
    return " ".join(" ".join(parser.parts).split())


def run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    (tmp_path / "evals.py").write_text(SUITE, encoding="utf-8")
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(cli, [*args, "--store", str(tmp_path / "t.db")])
    finally:
        os.chdir(old)
    return result.exit_code, result.stdout, result.stderr


def reports(tmp_path: Path, stem: str) -> list[str]:
    return [
        *("--json", f"r/{stem}.json", "--markdown", f"r/{stem}.md"),
        *("--junit", f"r/{stem}.xml", "--html", f"r/{stem}.html"),
    ]


def junit_properties(path: Path) -> list[tuple[str, str]]:
    (suite,) = list(JUnitXml.fromfile(str(path)))
    return [(p.name, p.value) for p in suite.properties()]


def test_exit_3_keeps_the_failed_regression_task_as_a_reason(tmp_path: Path) -> None:
    code, _, err = run(tmp_path, "run", "evals.py:regression", "--no-progress", "-q",
                       *reports(tmp_path, "g"))  # fmt: skip

    assert code == 3
    assert [line for line in err.splitlines() if line.startswith("gate failed")] == [
        f"gate failed: {reason}" for reason in BOTH
    ]
    data = json.loads((tmp_path / "r/g.json").read_text(encoding="utf-8"))
    assert data["gate"] == {
        "verdict": "failed",
        "exit_code": 3,
        "reasons": BOTH,
        "min_pass_rate": None,
        "fail_on_error": 0,
    }
    assert data["model_calls"] == {"mode": "live", "cassette": None}
    markdown = (tmp_path / "r/g.md").read_text(encoding="utf-8")
    assert "**❌ Gate failed (exit 3)**\n- 2 of 6 trials errored (allowed: none)\n" in markdown
    assert "- regression tasks did not pass: wrong\n" in markdown
    props = junit_properties(tmp_path / "r/g.xml")
    assert ("trialkit.gate", "failed") in props
    assert ("trialkit.exit_code", "3") in props
    assert [v for k, v in props if k == "trialkit.gate_reason"] == BOTH
    assert ("trialkit.model_calls", "live") in props
    page = html_text(tmp_path / "r/g.html")
    assert "✗ Gate failed (exit 3) 2 of 6 trials errored (allowed: none) regression tasks" in page


def test_a_passing_gate_says_so_with_its_thresholds(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, "run", "evals.py:chat", "--no-progress", "-q",
                       "--min-pass-rate", "0.5", *reports(tmp_path, "p"))  # fmt: skip

    assert code == 0
    data = json.loads((tmp_path / "r/p.json").read_text(encoding="utf-8"))
    assert data["gate"]["verdict"] == "passed"
    assert data["gate"]["min_pass_rate"] == 0.5
    assert "**✅ Gate passed (exit 0)**" in (tmp_path / "r/p.md").read_text(encoding="utf-8")
    assert ("trialkit.exit_code", "0") in junit_properties(tmp_path / "r/p.xml")
    assert "✓ Gate passed (exit 0)" in html_text(tmp_path / "r/p.html")
    run_id = out.rsplit("run ", 1)[1].strip()

    # Written later from the store: the same verdict, judged against the same threshold.
    code, text, _ = run(tmp_path, "report", run_id, "--format", "json")
    assert code == 0
    assert json.loads(text)["gate"] == data["gate"]


@pytest.mark.parametrize("mode", ["record", "replay", "auto"])
def test_every_format_says_how_the_model_calls_were_made(tmp_path: Path, mode: str) -> None:
    cassette = tmp_path / "cassette"
    if mode == "replay":
        first, _, _ = run(tmp_path, "run", "evals.py:chat", "--no-progress", "-q",
                          "--cache", str(cassette), "--cache-mode", "record")  # fmt: skip
        assert first == 0

    code, _, err = run(tmp_path, "run", "evals.py:chat", "--no-progress", "-q",
                       "--cache", str(cassette), "--cache-mode", mode,
                       *reports(tmp_path, mode))  # fmt: skip

    assert code == 0, err
    data = json.loads((tmp_path / f"r/{mode}.json").read_text(encoding="utf-8"))
    assert data["model_calls"] == {"mode": mode, "cassette": str(cassette)}
    said = {
        "record": "recorded: every model call went to the model and was stored",
        "replay": "replayed: every model call was answered from the cassette",
        "auto": "replayed where the cassette held an answer, the rest called live",
    }[mode]
    assert f"Model calls: {said}" in (tmp_path / f"r/{mode}.md").read_text(encoding="utf-8")
    assert f"Model calls: {said}" in html_text(tmp_path / f"r/{mode}.html")
    props = junit_properties(tmp_path / f"r/{mode}.xml")
    assert ("trialkit.model_calls", mode) in props
    assert ("trialkit.cassette", str(cassette)) in props
