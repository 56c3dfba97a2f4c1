"""`pip install trialkit` alone: the README's Python examples, `trialkit run` of a Python
suite with its reports, the pytest plugin, and a clear line (exit 2) naming the extra to
install for what needs one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.installs.helpers import python, readme_python_blocks, said, trialkit, write_capitals

INSTALL = "core"
TOOLS_SUITE = """
import sys

from trialkit import Suite, Task
from trialkit.harness.subprocess import SubprocessAgent


def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


agent = SubprocessAgent([sys.executable, "-c", "print('hi')"], tools=[add])
suite = Suite(id="tools", harness=agent, tasks=[Task(id="t", input="add")])
"""


@pytest.mark.parametrize("block", range(len(readme_python_blocks())))
def test_the_readme_python_example_runs(tmp_path: Path, block: int) -> None:
    done = python(readme_python_blocks()[block], cwd=tmp_path)
    assert done.returncode == 0, said(done)


def test_there_are_readme_python_examples() -> None:
    assert len(readme_python_blocks()) >= 1


def test_each_public_name_imports_first_in_a_fresh_process(tmp_path: Path) -> None:
    """`from trialkit import run_sync` as a program's first import works (an import cycle can
    hide behind the order in which other names happen to be imported)."""
    import trialkit

    # one name per module the names come from (the package imports each on first use)
    origins: dict[str, str] = getattr(trialkit, "_ORIGINS", {})
    first: dict[str, str] = {}
    for name in trialkit.__all__:
        first.setdefault(origins.get(name, name), name)
    failed = {}
    for name in sorted(first.values()):
        done = python(f"from trialkit import {name}", cwd=tmp_path)
        if done.returncode != 0:
            failed[name] = (done.stderr.strip().splitlines() or ["?"])[-1]
    assert failed == {}


def test_trialkit_run_of_a_python_suite_stores_and_reports(tmp_path: Path) -> None:
    write_capitals(tmp_path, kind="capability")
    done = trialkit(
        "run", "capitals.py", "--json", "out/report.json", "--html", "out/report.html",
        "--junit", "out/report.xml", "--markdown", "out/report.md", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, said(done)
    assert "1/2 tasks passed" in done.stdout, said(done)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["summary"]["tasks"] == 2 and report["summary"]["passed_tasks"] == 1
    for name in ("report.html", "report.xml", "report.md"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    run_id = report["run"]["id"]
    for fmt in ("table", "md", "json", "junit", "html", "csv"):
        shown = trialkit("report", run_id, "--format", fmt, "-o", f"again.{fmt}", cwd=tmp_path)
        assert shown.returncode == 0, said(shown)
    listed = trialkit("runs", "--json", cwd=tmp_path)
    assert [r["id"] for r in json.loads(listed.stdout)] == [run_id], said(listed)


def test_a_regression_that_fails_exits_1(tmp_path: Path) -> None:
    write_capitals(tmp_path, kind="regression")
    done = trialkit("run", "capitals.py", "--no-progress", cwd=tmp_path)
    assert done.returncode == 1, said(done)


def test_the_pytest_plugin_runs_an_eval_file(tmp_path: Path) -> None:
    write_capitals(tmp_path, kind="regression").rename(tmp_path / "eval_capitals.py")
    done = python(
        "import sys, pytest; sys.exit(pytest.main(['-p', 'no:cacheprovider', '-q', "
        "'eval_capitals.py']))",
        cwd=tmp_path,
    )
    assert done.returncode == 1, said(done)  # one test item per task: spain fails
    assert "1 passed" in done.stdout and "1 failed" in done.stdout, said(done)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["view"], "view"),
        (["run", "capitals.py", "--model", "openai/gpt-4o-mini"], "openai"),
        (["run", "capitals.py", "--model", "anthropic/claude-sonnet-4-5"], "anthropic"),
        (["run", "capitals.py", "--executor", "ray"], "ray"),
        (["run", "hf:data.jsonl", "--model", "scripted/echo"], "hf"),
        (["run", "capitals.py", "--store", "postgresql+psycopg://u@127.0.0.1:9/db"], "postgres"),
        (["run", "tools.py"], "mcp"),
    ],
    ids=["view", "openai", "anthropic", "ray", "hf", "postgres", "mcp"],
)
def test_what_needs_an_extra_says_which_to_install(
    tmp_path: Path, args: list[str], extra: str
) -> None:
    write_capitals(tmp_path)
    (tmp_path / "data.jsonl").write_text('{"input": "hi", "target": "hi"}\n')
    (tmp_path / "tools.py").write_text(TOOLS_SUITE, encoding="utf-8")
    done = trialkit(*args, cwd=tmp_path)
    assert done.returncode == 2, said(done)
    assert f"trialkit[{extra}]" in done.stderr, said(done)
    assert "Traceback" not in done.stderr, said(done)


def test_what_needs_an_extra_on_a_stored_run_says_which_to_install(tmp_path: Path) -> None:
    write_capitals(tmp_path)
    done = trialkit("run", "capitals.py", "--json", "report.json", cwd=tmp_path)
    assert done.returncode == 0, said(done)
    run_id = json.loads((tmp_path / "report.json").read_text())["run"]["id"]
    label = {"run_id": run_id, "task_id": "france", "trial": 0, "grader": "contains('paris')"}
    (tmp_path / "labels.jsonl").write_text(json.dumps({**label, "verdict": "pass"}) + "\n")
    langfuse = {
        "LANGFUSE_HOST": "http://127.0.0.1:9",
        "LANGFUSE_PUBLIC_KEY": "pk",
        "LANGFUSE_SECRET_KEY": "sk",
    }
    needs = [
        (["export", run_id, "--to", "otel", "--endpoint", "http://127.0.0.1:9"], "otel", {}),
        (["export", run_id, "--to", "langfuse"], "otel", langfuse),
        (["calibrate", "--labels", "labels.jsonl"], "stats", {}),
        (
            ["agreement", run_id, "--labels", "labels.jsonl", "--grader", label["grader"]],
            "stats",
            {},
        ),
    ]
    for args, extra, env in needs:
        done = trialkit(*args, cwd=tmp_path, env=env)
        assert done.returncode == 2 and f"trialkit[{extra}]" in done.stderr, said(done)
        assert "Traceback" not in done.stderr, said(done)
