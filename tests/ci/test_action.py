"""The composite action (`action.yml`), its steps run locally as a GitHub runner runs them,
against a fake GitHub REST API on 127.0.0.1: the comment is posted, then updated; the job
summary is written; annotations point at the failing tasks' lines; a regression fails the job;
the token never shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .action_runner import ROOT, ActionResult, load_action, run_action, runner_env
from .fake_github import FakeGitHub, fake_github

pytestmark = pytest.mark.e2e

TOKEN = "ghs_S3cretT0kenForTheFakeGitHub0000000000"
PR = 42

SUITE = """
import os
from trialkit import Suite, Task, graders

BROKEN = int(os.environ.get("AGENT_BROKEN", "0"))


def agent(prompt: str) -> str:
    number = int(prompt.split()[-1])
    return "no" if number < BROKEN else "yes"


suite = Suite(
    id="gate",
    kind="regression",
    harness=agent,
    tasks=[
        Task(id=f"task-{i}", input=f"answer {i}", graders=[graders.contains("yes")])
        for i in range(8)
    ],
)
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "home").mkdir()
    (work / "evals.py").write_text(SUITE, encoding="utf-8")
    return work


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """`python` that records `python -m pip ...` instead of installing (the test's venv holds
    trialkit already) and runs everything else with this interpreter."""
    folder = tmp_path / "bin"
    folder.mkdir()
    python = folder / "python"
    python.write_text(
        "#!/bin/bash\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then\n'
        f'  printf "%s\\n" "$@" > {tmp_path / "pip.log"}\n'
        "  exit 0\n"
        "fi\n"
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    python.chmod(0o755)
    return folder


@pytest.fixture
def github() -> FakeGitHub:
    with fake_github(TOKEN) as fake:
        yield fake


def baseline_run(workspace: Path) -> Path:
    """The base branch's run, in a store of its own: its JSON report is the baseline."""
    target = workspace / "baseline.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "trialkit",
            "run",
            "evals.py",
            "--no-progress",
            "--quiet",
            "--json",
            str(target),
            "--store",
            f"sqlite:///{workspace.parent / 'main.db'}",
        ],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(workspace.parent / "home")},
    )
    assert done.returncode == 0, done.stderr
    return target


def act(
    workspace: Path, fake_bin: Path, github: FakeGitHub, *, broken: int, **inputs: str
) -> ActionResult:
    event = workspace.parent / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR}}), encoding="utf-8")
    summary = workspace.parent / "summary.md"
    env = runner_env(
        workspace,
        fake_bin,
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_EVENT_PATH=str(event),
        GITHUB_API_URL=github.url,
        AGENT_BROKEN=str(broken),
    )
    return run_action(
        {
            "target": "evals.py",
            "store": f"sqlite:///{workspace.parent / 'pr.db'}",
            "report-url": "https://reports.example/pr-42/report.html",
            **inputs,
        },
        workspace=workspace,
        env=env,
        github={"action_path": str(ROOT), "token": TOKEN},
    )


def test_the_uses_steps_are_well_formed() -> None:
    action = load_action()
    uses = [step for step in action["runs"]["steps"] if "uses" in step]
    assert [step["uses"] for step in uses] == [
        "actions/setup-python@v5",
        "actions/upload-artifact@v4",
    ]
    for step in uses:
        assert re.fullmatch(r"[\w-]+/[\w-]+@v\d+", step["uses"])
        assert "run" not in step and "shell" not in step
        assert all(isinstance(v, str) for v in step["with"].values())
    upload = uses[1]
    assert upload["with"]["path"] == "${{ inputs.output-dir }}"
    assert upload["if"].startswith("always()")
    for step in action["runs"]["steps"]:
        if "run" in step:  # inputs reach scripts through env, never spliced into the code
            assert "${{ inputs." not in step["run"], step["name"]


def test_a_regression_comments_annotates_summarizes_and_fails_then_a_fix_updates_the_comment(
    workspace: Path, fake_bin: Path, github: FakeGitHub, tmp_path: Path
) -> None:
    baseline = baseline_run(workspace)

    first = act(workspace, fake_bin, github, broken=7, baseline=str(baseline))

    # Installed this action's own copy with the default extras.
    assert (tmp_path / "pip.log").read_text().splitlines()[-1] == f"{ROOT}[stats]"
    # The run's gate failed (7 regression tasks fail) and the comparison says worse.
    assert first.step("run").outputs["exit-code"] == "1"
    assert first.outputs["outcome"] == "worse"
    assert first.exit_code == 1 and first.step("Gate").code == 1
    # Annotations at the line that built each failing task: evals.py, the Task(...) line.
    line = (
        SUITE.splitlines().index(
            '        Task(id=f"task-{i}", input=f"answer {i}", graders=[graders.contains("yes")])'
        )
        + 1
    )
    notes = [n for n in first.step("summarize").stdout.splitlines() if n.startswith("::")]
    assert f"::error file=evals.py,line={line},title=task-0%3A new failure::" in notes[0]
    assert sum(n.startswith("::error file=evals.py") for n in notes) == 7
    # The comment was posted once, with the marker, the verdict, new failures first, a link.
    posts = [r for r in github.requests if r.method == "POST"]
    assert [r.path for r in posts] == [f"/repos/octo/evals/issues/{PR}/comments"]
    (comment,) = github.comments.values()
    body = comment["body"]
    assert body.startswith(
        "<!-- trialkit-comparison -->\n❌ **trialkit: worse than the baseline on these tasks**"
    )
    assert "exact stratified test p = 0.0156" in body
    assert body.index("### New failures (7)") < body.index("<details><summary>1 other task")
    assert "[B · " in body and "(https://reports.example/pr-42/report.html)" in body
    assert f"https://github.example/octo/evals/blob/{'0123456789abcdef' * 2}" in body
    assert first.outputs["comment-url"].startswith("https://github.example/pr/42#c")
    # The job summary: the comparison, then the run's report.
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "worse than the baseline" in summary and "## trialkit · " in summary
    assert "<!-- trialkit-comparison -->" not in summary
    # The reports a later step uploads.
    out = workspace / "trialkit-reports"
    assert sorted(p.name for p in out.iterdir()) == [
        "comment.md",
        "junit.xml",
        "report.html",
        "report.json",
        "report.md",
    ]

    second = act(workspace, fake_bin, github, broken=0, baseline=str(baseline))

    assert second.exit_code == 0 and second.outputs["exit-code"] == "0"
    assert second.outputs["outcome"] == "no_difference"
    assert [r.method for r in github.requests].count("POST") == 1  # not a second comment
    patches = [r for r in github.requests if r.method == "PATCH"]
    assert [r.path for r in patches] == [f"/repos/octo/evals/issues/comments/{comment['id']}"]
    (updated,) = github.comments.values()
    assert "no significant change from the baseline on these tasks" in updated["body"]
    # Every request carried the token, and nothing printed or written shows it.
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in github.requests)
    written = [p.read_text(errors="replace") for p in out.iterdir()]
    written.append((tmp_path / "summary.md").read_text())
    for result in (first, second):
        assert TOKEN not in result.text
        assert TOKEN not in json.dumps(result.outputs)
        assert TOKEN not in json.dumps([s.outputs for s in result.steps])
    assert not any(TOKEN in text for text in written)


def test_without_a_baseline_file_yet_the_run_is_summarized_and_its_gate_decides(
    workspace: Path, fake_bin: Path, github: FakeGitHub, tmp_path: Path
) -> None:
    result = act(
        workspace,
        fake_bin,
        github,
        broken=1,
        baseline="missing/baseline.json",
        version="1.2.3",
        extras="stats, openai",
    )

    assert (tmp_path / "pip.log").read_text().splitlines()[-1] == "trialkit[stats,openai]==1.2.3"
    assert "::warning title=trialkit::the baseline missing/baseline.json does not exist" in (
        result.step("summarize").stdout
    )
    assert result.outputs["outcome"] == "no_baseline"
    assert result.exit_code == 1  # task-0 fails its regression gate
    (comment,) = github.comments.values()
    assert comment["body"].startswith("<!-- trialkit-comparison -->\n## trialkit · ")
    notes = result.step("summarize").stdout
    assert "::error file=evals.py,line=" in notes and "title=task-0%3A fail::" in notes


def test_a_refused_comment_is_a_warning_and_not_a_failed_job(
    workspace: Path, fake_bin: Path, github: FakeGitHub
) -> None:
    github.refuse = 403  # a pull request from a fork gets a read-only token

    result = act(workspace, fake_bin, github, broken=0)

    assert result.exit_code == 0
    step = result.step("comment")
    assert step.code == 0
    assert "::warning title=trialkit::could not post the PR comment: HTTP 403" in step.stdout
    assert TOKEN not in result.text
