"""The CI loop end to end, as a workflow runs it: the base branch's run writes its JSON report
(the artifact); a pull request's run, in a store of its own, compares with that file, gates on
a regression, and writes the PR comment, the job summary, the annotations and JUnit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from trialkit.reports.github import COMMENT_MARKER, STEP_SUMMARY_LIMIT
from trialkit.store import Store

TASKS = 10
SUITE_HEAD = """\
import os
from trialkit import Suite, Task, graders


def agent(prompt):
    broken = set(os.environ.get("BROKEN", "").split(","))
    return "no, " * 100 if prompt in broken else prompt


tasks = [
"""
SUITE_TASK = '    Task(id="{id}", input="{id}", graders=[graders.contains("{id}")]),\n'
SUITE_TAIL = """\
]
suite = Suite(id="loop", kind="{kind}", trials=2, harness=agent, tasks=tasks)
"""


def write_suite(folder: Path, kind: str, count: int = TASKS) -> dict[str, int]:
    """The suite file `evals.py`, one task a line; the line of each task."""
    text = SUITE_HEAD + "".join(SUITE_TASK.format(id=f"t{i}") for i in range(count))
    (folder / "evals.py").write_text(text + SUITE_TAIL.format(kind=kind))
    first = SUITE_HEAD.count("\n") + 1
    return {f"t{i}": first + i for i in range(count)}


def trialkit(folder: Path, *args: str, broken: str = "") -> subprocess.CompletedProcess[str]:
    """`trialkit ARGS` in its own process, in `folder`, as a workflow step runs it."""
    env = {**os.environ, "BROKEN": broken, "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIALKIT_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "trialkit", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def main_run(folder: Path) -> str:
    """The base branch's run in its own store; its id. Its report is `main.json`."""
    done = trialkit(folder, "run", "evals.py", "--store", "main.db", "--json", "main.json", "-q")
    assert done.returncode == 0, done.stderr
    return str(json.loads((folder / "main.json").read_text())["run"]["id"])


@pytest.mark.parametrize("kind", ["capability", "regression"])
def test_a_changed_agent_against_the_base_branch_report(tmp_path: Path, kind: str) -> None:
    lines = write_suite(tmp_path, kind)
    main_id = main_run(tmp_path)
    broken = [f"t{i}" for i in range(1, 8)]
    url = "https://example.test/pr/report.html"
    done = trialkit(
        tmp_path,
        "run",
        "evals.py",
        "--no-progress",
        "--store",
        "pr.db",
        "--baseline",
        "main.json",
        "--fail-on-regression",
        "--github-comment",
        "comment.md",
        "--report-url",
        url,
        "--markdown",
        "summary.md",
        "--junit",
        "junit.xml",
        "--junit-locations",
        "attributes",
        "--annotations",
        "--json",
        "pr.json",
        broken=",".join(broken),
    )
    # significantly worse: exit 1 whatever the suite's own gate says
    assert done.returncode == 1, done.stderr
    assert f"regression: significantly worse than the baseline {main_id}" in done.stderr
    assert f"A is the baseline {main_id}; B is this run." in done.stdout
    if kind == "regression":  # the suite's gate fails too, and says why
        assert "gate failed:" in done.stderr

    # the PR's store holds only the PR's run: the baseline came from the file
    with Store(f"sqlite:///{tmp_path / 'pr.db'}") as store:
        assert [run.id for run in store.list_runs()] != [main_id]
        assert len(store.list_runs()) == 1

    comment = (tmp_path / "comment.md").read_text()
    assert comment.startswith(COMMENT_MARKER + "\n")
    assert "**trialkit: worse than the baseline on these tasks**" in comment.splitlines()[1]
    assert f"]({url})" in comment
    new, rest = comment.split("<details>")  # the new failures first, the rest collapsed
    for task in broken:
        assert f"| {task} | `evals.py:{lines[task]}` |" in new
    assert "| t0 |" in rest
    assert len(comment) <= 65_536

    summary = (tmp_path / "summary.md").read_text()
    worse = "**trialkit: worse than the baseline on these tasks**"
    assert worse in summary  # the comparison comes first
    assert summary.index(worse) < summary.index("t0")

    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    new_failures = [a for a in annotations if "new failure" in a]
    assert len(new_failures) == len(broken)
    for task in broken:
        (mine,) = [a for a in new_failures if f"title={task}%3A " in a]
        assert mine.startswith(f"::error file=evals.py,line={lines[task]},"), mine

    cases = {case.get("name"): case for case in ET.parse(tmp_path / "junit.xml").iter("testcase")}
    assert cases["t1"].get("file") == "evals.py"
    assert cases["t1"].get("line") == str(lines["t1"])
    # a failed capability task is skipped, never a red check; a regression task fails
    failed = cases["t1"].find("skipped" if kind == "capability" else "failure")
    assert failed is not None
    assert cases["t0"].find("failure") is None and cases["t0"].find("skipped") is None

    # the PR's report is itself a baseline for the next run: comparing the two files agrees
    compared = trialkit(
        tmp_path, "compare", "main.json", "pr.json", "--format", "github", "--report-url", url
    )
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.strip() == comment.strip()


def test_a_run_as_good_as_its_baseline_passes_with_a_comment_that_says_so(
    tmp_path: Path,
) -> None:
    write_suite(tmp_path, "regression")
    main_run(tmp_path)
    done = trialkit(
        tmp_path,
        "run",
        "evals.py",
        "--no-progress",
        "--store",
        "pr.db",
        "--baseline",
        "main.json",
        "--fail-on-regression",
        "--github-comment",
        "comment.md",
        "--annotations",
    )
    assert done.returncode == 0, done.stderr
    assert "regression" not in done.stderr
    comment = (tmp_path / "comment.md").read_text()
    assert "worse than" not in comment and "no significant change from the baseline" in comment
    assert not [line for line in done.stdout.splitlines() if line.startswith("::")]


def test_the_job_summary_of_2000_failing_tasks_stays_under_githubs_limit(
    tmp_path: Path,
) -> None:
    lines = write_suite(tmp_path, "capability", count=2000)
    done = trialkit(tmp_path, "run", "evals.py", "--store", "main.db", "--json", "main.json", "-q")
    assert done.returncode == 0, done.stderr
    everything = ",".join(lines)
    done = trialkit(
        tmp_path,
        "run",
        "evals.py",
        "--no-progress",
        "--store",
        "pr.db",
        "--baseline",
        "main.json",
        "--markdown",
        "summary.md",
        "--github-comment",
        "comment.md",
        "--annotations",
        "--quiet",
        broken=everything,
    )
    assert done.returncode == 0, done.stderr  # a capability suite, no --fail-on-regression
    summary = (tmp_path / "summary.md").read_bytes()
    assert len(summary) <= STEP_SUMMARY_LIMIT
    assert summary.rstrip().endswith(
        b"not shown (cut to fit GitHub's size limit): see the JSON or HTML report._"
    )
    comment = (tmp_path / "comment.md").read_text()
    assert len(comment) <= 65_536
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    assert len(annotations) == 51  # 50, then a notice of the rest
    assert annotations[-1].startswith("::notice ") and "1,950 more tasks" in annotations[-1]


def test_usage_errors_of_the_comment_options(tmp_path: Path) -> None:
    write_suite(tmp_path, "capability")
    main_run(tmp_path)
    for args, message in [
        (["--github-comment", "c.md"], "--github-comment needs --baseline"),
        (["--markdown", "s.md", "--report-url", "https://x.test/"], "--report-url goes with"),
        (
            ["--baseline", "main.json", "--github-comment", "c.md"]
            + ["--report-url", "https://x.test/a"] * 3,
            "--report-url: 3 URLs",
        ),
    ]:
        done = trialkit(tmp_path, "run", "evals.py", "-q", "--store", "x.db", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()  # nothing ran, nothing stored
