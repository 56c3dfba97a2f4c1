"""GitHub rendering: the PR comment, workflow annotations, and the size caps of the job summary
and the comment (a report of 2,000 failing tasks with long outputs)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from trialkit import Suite, Task, graders, run_sync
from trialkit.analysis.compare import compare_reports
from trialkit.loaders.target import load_target
from trialkit.report import Report, TaskPlan
from trialkit.reports.github import (
    COMMENT_MARKER,
    annotations,
    escape_data,
    escape_property,
    render_job_summary,
    render_pr_comment,
)
from trialkit.reports.markdown import inline, render_markdown
from trialkit.score import Verdict
from trialkit.task import SuiteKind

from ._factory import failing_contains, make_report, result

STEP_SUMMARY_LIMIT = 1_048_576
PR_COMMENT_LIMIT = 65_536


def plans(ids: list[str], kind: SuiteKind = SuiteKind.REGRESSION) -> list[TaskPlan]:
    return [TaskPlan(id=i, kind=kind, file="suite.yaml", line=10 + n) for n, i in enumerate(ids)]


def two_runs() -> tuple[Report, Report]:
    """Base passes a..h and fails `fixed-1`; the candidate newly fails `new-1`..`new-3`,
    fixes `fixed-1`, errors on `broken`, is flaky on `wobbly` and keeps `steady-*`."""
    p, fl, e = Verdict.PASS, Verdict.FAIL, Verdict.ERROR

    def trials(*verdicts: Verdict) -> list:
        return [result(i, v) for i, v in enumerate(verdicts)]

    before = {
        "steady-1": trials(p, p),
        "new-1": trials(p, p),
        "steady-2": trials(p, p),
        "new-2": trials(p, p),
        "new-3": trials(p, p),
        "fixed-1": trials(fl, fl),
        "broken": trials(p, p),
        "wobbly": trials(p, p),
    }
    after = {
        **before,
        "new-1": trials(fl, fl),
        "new-2": trials(p, fl),
        "new-3": trials(fl, fl),
        "fixed-1": trials(p, p),
        "broken": trials(e, e),
    }
    ids = list(before)
    base = make_report(before, plans=plans(ids))
    cand = make_report(after, plans=plans(ids))
    cand.run.id = "run-cand"
    return base, cand


def test_the_comment_puts_significant_changes_first_and_collapses_the_rest() -> None:
    comparison = compare_reports(list(two_runs()))

    body = render_pr_comment(comparison, report_urls=["https://ci.example/r/report.html"])

    lines = body.splitlines()
    assert lines[0] == COMMENT_MARKER
    assert lines[1].startswith(
        "➖ **trialkit: no significant change from the baseline on these tasks**: exact "
        "stratified test p = 0.356"
    )
    assert "3 new failures, 1 fixed, 1 errored, 1 not compared, of 8 tasks" in lines[1]
    assert lines[3] == inline(comparison.pairs[0].conclusion)  # the conclusion comes next
    assert "Not compared: broken (" in lines[3]
    order = [
        body.index("### New failures (3)"),
        body.index("### Fixed (1)"),
        body.index("### Errors (1)"),
        body.index("<details><summary>3 other tasks (unchanged)</summary>"),
        body.index("</details>"),
    ]
    assert order == sorted(order)
    new_failures = body[order[0] : order[1]]
    assert [line.split(" | ")[0] for line in new_failures.splitlines() if "new-" in line] == [
        "| new-1",
        "| new-2",
        "| new-3",
    ]
    assert "| new-2 | `suite.yaml:13` | ✅ 2/2 100.0% | ❌ 1/2 50.0% 🎲 | −50.0 pts |" in body
    assert "steady-1" in body[order[3] :] and "steady-1" not in body[: order[3]]
    assert "📄 HTML report: [B · nightly (run-cand)](https://ci.example/r/report.html)" in body


def test_links_to_every_run_and_to_the_task_lines_at_the_commit() -> None:
    comparison = compare_reports(list(two_runs()))

    body = render_pr_comment(
        comparison,
        report_urls=["https://ci.example/main.html", "https://ci.example/pr (1).html"],
        blob_url="https://github.com/o/r/blob/abc/",
    )

    assert "[A · nightly (run-7f3a)](https://ci.example/main.html)" in body
    assert "[B · nightly (run-cand)](https://ci.example/pr%20%281%29.html)" in body
    assert "[`suite.yaml:11`](https://github.com/o/r/blob/abc/suite.yaml#L11)" in body
    with pytest.raises(ValueError, match="3 report URLs for 2 runs"):
        render_pr_comment(comparison, report_urls=["a", "b", "c"])


def test_escaping_of_workflow_commands() -> None:
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("dir:a,b%\n") == "dir%3Aa%2Cb%25%0A"


def test_annotations_of_a_report_escape_and_point_at_the_line() -> None:
    report = make_report(
        {
            "50%: a, b": [result(0, Verdict.FAIL, scores=[failing_contains("x\ny")])],
            "cap": [result(0, Verdict.FAIL)],
            "err": [result(0, Verdict.ERROR, scores=[])],
            "flaky": [result(0, Verdict.PASS), result(1, Verdict.FAIL)],
            "fine": [result(0, Verdict.PASS)],
        },
        kind=SuiteKind.MIXED,
        plans=[
            TaskPlan(id="50%: a, b", kind=SuiteKind.REGRESSION, file="dir, x/s:1.yaml", line=7),
            TaskPlan(id="cap", kind=SuiteKind.CAPABILITY, file="s.yaml", line=9),
            TaskPlan(id="err", kind=SuiteKind.REGRESSION),
            TaskPlan(id="flaky", kind=SuiteKind.CAPABILITY, file="s.yaml", line=11),
            TaskPlan(id="fine", kind=SuiteKind.REGRESSION, file="s.yaml", line=13),
        ],
    )

    lines = annotations(report)

    assert lines == [
        "::error file=dir%2C x/s%3A1.yaml,line=7,title=50%25%3A a%2C b%3A fail::0/1 trials "
        "passed; trial #0: contains('x%0Ay'): 'x%0Ay' does not occur in the output",
        "::warning title=err%3A error::0/1 trials passed; trial #0: error",
        "::warning file=s.yaml,line=9,title=cap%3A fail (capability task%3A not a gate failure)"
        "::0/1 trials passed; trial #0: contains('paris'): 'paris' does not occur in the output",
        "::warning file=s.yaml,line=11,title=flaky%3A flaky::1/2 trials passed; trial #1: "
        "contains('paris'): 'paris' does not occur in the output",
    ]
    assert annotations(report, limit=1)[1] == (
        "::notice title=trialkit::3 more tasks to look at are not annotated: see the report"
    )


def test_annotations_of_a_comparison_mark_new_failures_first() -> None:
    lines = annotations(compare_reports(list(two_runs())))

    assert [line.split("::")[1] for line in lines] == [
        "error file=suite.yaml,line=11,title=new-1%3A new failure",
        "error file=suite.yaml,line=13,title=new-2%3A new failure",
        "error file=suite.yaml,line=14,title=new-3%3A new failure",
        "warning file=suite.yaml,line=16,title=broken%3A error",
    ]
    assert lines[0].endswith("::baseline A: pass 2/2 100.0%25; B: fail 0/2 0.0%25")


def _agent(prompt: str) -> str:
    return "no" if "bad" in prompt else "yes"


def test_annotations_point_at_the_task_in_a_yaml_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "suite"
    (folder / "tasks").mkdir(parents=True)
    (folder / "agent.py").write_text(
        "def run(prompt):\n    return 'no' if 'bad' in prompt else 'yes'\n"
    )
    (folder / "suite.yaml").write_text(
        textwrap.dedent(
            """\
            id: yaml-suite
            kind: regression
            harness: {python: agent:run}
            graders:
              - contains: "yes"
            tasks:
              - id: good
                input: good question
              - id: bad-inline
                input: bad question
            dataset:
              path: rows.jsonl
              id: "row-{{name}}"
            """
        )
    )
    (folder / "tasks" / "bad-file.yaml").write_text(
        "# a task of its own\nid: bad-file\ninput: bad one\n"
    )
    (folder / "rows.jsonl").write_text(
        '{"name": "ok", "input": "fine"}\n\n{"name": "no", "input": "bad"}\n'
    )
    monkeypatch.chdir(tmp_path)

    report = run_sync(load_target("suite"))

    located = {t.id: (t.file, t.line) for t in report.tasks}
    assert located == {
        "good": ("suite/suite.yaml", 7),
        "bad-inline": ("suite/suite.yaml", 9),
        "bad-file": ("suite/tasks/bad-file.yaml", 2),
        "row-ok": ("suite/rows.jsonl", 1),
        "row-no": ("suite/rows.jsonl", 3),
    }
    errors = sorted(line.split("::")[1] for line in annotations(report))
    assert errors == [
        "error file=suite/rows.jsonl,line=3,title=row-no%3A fail",
        "error file=suite/suite.yaml,line=9,title=bad-inline%3A fail",
        "error file=suite/tasks/bad-file.yaml,line=2,title=bad-file%3A fail",
    ]


def test_annotations_point_at_the_task_in_a_python_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(
        """\
        from trialkit import Suite, Task, graders

        def agent(prompt):
            return "no"

        suite = Suite(
            id="py-suite",
            kind="regression",
            harness=agent,
            tasks=[
                Task(id="first", input="q", graders=[graders.contains("yes")]),
                Task(
                    id="second",
                    input="q",
                    graders=[graders.contains("yes")],
                ),
            ],
        )
        """
    )
    (tmp_path / "evals.py").write_text(source)
    monkeypatch.chdir(tmp_path)

    report = run_sync(load_target("evals.py"))

    assert [line.split("::")[1] for line in annotations(report)] == [
        "error file=evals.py,line=11,title=first%3A fail",
        "error file=evals.py,line=12,title=second%3A fail",
    ]


def test_a_task_built_here_records_this_line_and_a_given_source_wins() -> None:
    here = Task(id="here", input="q")
    given = Task(id="given", input="q", source=("suites/x.yaml", 3))

    assert here.source == (
        __file__,
        test_a_task_built_here_records_this_line_and_a_given_source_wins.__code__.co_firstlineno
        + 1,
    )
    assert given.source == ("suites/x.yaml", 3)
    suite = Suite(id="s", tasks=[here], harness=_agent, graders=[graders.contains("yes")])
    assert run_sync(suite).tasks[0].file == "tests/reports/test_github.py"


# -- the size caps -----------------------------------------------------------------------------


def huge_report(n: int = 2000) -> Report:
    """`n` failing tasks (the first 200 regression, the rest capability) with 4,000-character
    outputs of multibyte text, and 50 passing ones."""
    long = "Ünïcödé output that goes on " * 150
    tasks = {
        f"task-{i:04d}": [
            result(0, Verdict.FAIL, output=long[:4000]),
            result(1, Verdict.FAIL, output=long[1:4001]),
        ]
        for i in range(n)
    }
    tasks |= {f"ok-{i}": [result(0, Verdict.PASS)] for i in range(50)}
    kinds = [SuiteKind.REGRESSION if i < 200 else SuiteKind.CAPABILITY for i in range(n)]
    return make_report(
        tasks,
        kind=SuiteKind.MIXED,
        plans=[
            TaskPlan(id=task_id, kind=kinds[i] if i < n else SuiteKind.REGRESSION)
            for i, task_id in enumerate(tasks)
        ],
    )


def test_the_markdown_summary_of_2000_failing_tasks_stays_under_1_mib() -> None:
    report = huge_report()
    whole = render_markdown(report, limit=None)
    assert len(whole.encode()) > 3 * STEP_SUMMARY_LIMIT  # it would not fit

    text = render_markdown(report)

    size = len(text.encode())
    assert STEP_SUMMARY_LIMIT - 20_000 < size < STEP_SUMMARY_LIMIT
    last = text.rstrip("\n").splitlines()[-1]
    match = re.fullmatch(
        r"_… 50 more task table rows and ([\d,]+) more failing tasks' details not shown \(cut "
        r"to fit GitHub's size limit\): see the JSON or HTML report\._",
        last,
    )
    assert match, last
    shown = text.count("#### ❌ ")
    assert shown + int(match[1].replace(",", "")) == 2000 and shown > 200
    # Every task keeps its row in the table; the regression failures keep their details.
    assert all(f"| task-{i:04d} |" in text for i in range(2000))
    assert "| ok-0 |" not in text  # the passing tasks' rows go before any failing task's
    assert all(f"#### ❌ task-{i:04d} " in text for i in range(200))
    assert f"#### ❌ task-{1999:04d} " not in text


def test_the_job_summary_with_a_comparison_and_the_comment_stay_under_their_limits() -> None:
    before = make_report(
        {f"task-{i:04d}": [result(0, Verdict.PASS)] for i in range(2000)}, kind=SuiteKind.REGRESSION
    )
    after = huge_report()
    comparison = compare_reports([before, after])

    summary = render_job_summary(after, comparison=comparison, report_urls=["https://x/r.html"])
    comment = render_pr_comment(comparison)

    assert len(summary.encode()) < STEP_SUMMARY_LIMIT
    assert summary.startswith("❔ **trialkit") or summary.startswith("❌ **trialkit")
    assert "### New failures (2000)" in summary
    assert len(comment) < PR_COMMENT_LIMIT
    assert comment.startswith(COMMENT_MARKER + "\n")
    note = comment.rstrip("\n").splitlines()[-1]
    assert note.startswith("_… ") and "more new failures" in note
    shown = comment.count("| task-")
    assert shown + int(note.split()[1].replace(",", "")) == 2000
    assert "<details>" not in comment  # the least important section goes first
