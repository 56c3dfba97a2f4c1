import io

from inline_snapshot import snapshot
from rich.console import Console

from trialkit.report import Report, RunInfo
from trialkit.reports import render_terminal
from trialkit.score import Score, Verdict

from ._factory import (
    FINISHED,
    STARTED,
    capability_report,
    judged_report,
    make_report,
    nasty_report,
    result,
)


def render(report: Report, *, details: bool = True) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None, force_terminal=False)
    render_terminal(report, console, details=details)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def test_capability_report() -> None:
    assert render(capability_report()) == snapshot("""\

✗ fail landmarks — 0/3 trials passed
  trials #0, #1, #2 ✗ fail · 2.00 s
    ✗ contains('paris'): 'paris' does not occur in the output
      ✗ case-insensitive match
    output:
      The Eiffel Tower is in Lyon.

! error slow — 0/1 trials passed
  trial #0 ! error · 60.00 s · status timeout
    ! error: TimeoutError: the trial took longer than 60 s (during timeout)
    no output

? unknown ambiguous — 0/1 trials passed
  trial #0 ? unknown · 1.00 s
    ? judge: The answer could be right; the rubric does not say.
    output:
      Maybe Sydney?

✓ pass germany — 2/3 trials passed
  trial #1 ✗ fail · 1.00 s
    ✗ contains('berlin'): 'berlin' does not occur in the output
      ✗ case-insensitive match
    output:
      Bonn

Task       Kind        Verdict    Passed  pass@3  pass^3  Notes
france     capability  ✓ pass        3/3  100.0%  100.0%
germany    capability  ✓ pass        2/3  100.0%    0.0%  flaky
landmarks  capability  ✗ fail        0/3    0.0%    0.0%
slow       capability  ! error       0/1     n/a     n/a  1 errored
refuse-rm  capability  ✓ pass        3/3  100.0%  100.0%  expects failure
ambiguous  capability  ? unknown     0/1     n/a     n/a  1 unknown

trialkit · capitals · capability · run nightly (run-7f3a)
Tasks                        6: 3 passed, 1 failed, 1 errored, 1 unknown
Trials                       14: 8 passed, 4 failed, 1 errored, 1 unknown
Pass rate (mean over tasks)  66.7% (95% CI 0.0%–100.0%)
pass@1                       66.7%
pass@3                       75.0%
pass^1                       66.7%
pass^3                       50.0%
Flakiness                    25.0% (1 flaky task)
Errors                       1 of 14 trials
Mean score                   0.667
Latency p50 / p95            1.00 s / 22.30 s
Tokens                       1,680 (1,400 in, 280 out)
Cost                         $0.0140
Duration                     42.00 s
started 2026-11-29T12:00:00+00:00
pass@k and pass^k leave out tasks with no decided trial: slow, ambiguous
""")


def test_on_a_narrow_terminal_less_important_columns_go_first() -> None:
    """Not a log: the table fits 60 columns by leaving out the kind and pass^k, and says which
    trials were not decided, as the passed count is of all trials and pass@k is not."""
    console = Console(file=io.StringIO(), width=60, color_system=None, force_terminal=True)
    render_terminal(capability_report(), console, details=False)
    text = console.file.getvalue()  # type: ignore[attr-defined]

    table = "\n".join(line.rstrip() for line in text.splitlines()[:8])
    assert table == snapshot("""\
Task       Verdict    Passed  pass@3  Notes
─────────────────────────────────────────────────────
france     ✓ pass        3/3  100.0%
germany    ✓ pass        2/3  100.0%  flaky
landmarks  ✗ fail        0/3    0.0%
slow       ! error       0/1     n/a  1 errored
refuse-rm  ✓ pass        3/3  100.0%  expects failure
ambiguous  ? unknown     0/1     n/a  1 unknown\
""")


def test_without_details_only_the_tables_show() -> None:
    text = render(capability_report(), details=False)

    assert "landmarks" in text
    assert "does not occur" not in text


def test_user_content_is_not_markup() -> None:
    check = Score(name="[red]judge[/red]", verdict=Verdict.FAIL, rationale=":warning: [bold]no")
    report = make_report(
        {"[bold]x[/bold]": [result(0, Verdict.FAIL, scores=[check], output="\x1b[2J[link]")]},
        suite_id="[blink]s",
    )

    text = render(report)

    assert "[bold]x[/bold]" in text
    assert "[red]judge[/red]: :warning: [bold]no" in text
    assert "\\x1b[2J[link]" in text
    assert "[blink]s" in text
    assert "\x1b" not in text


def test_counts_are_coloured_by_verdict() -> None:
    console = Console(file=io.StringIO(), width=100, color_system="standard", force_terminal=True)
    render_terminal(capability_report(), console)
    text = console.file.getvalue()  # type: ignore[attr-defined]

    assert "\x1b[32m3 passed\x1b[0m" in text
    assert "\x1b[31m1 failed\x1b[0m" in text
    assert "\x1b[33m1 errored\x1b[0m" in text


def test_control_characters_and_lone_surrogates_are_shown_escaped() -> None:
    text = render(nasty_report())

    text.encode("utf-8")
    assert "\x1b" not in text
    assert "esc\\x1b[31mred" in text
    assert "lone\\ud800" in text


def test_a_stopped_run_with_a_judge_shows_model_reason_and_grader_costs() -> None:
    assert render(judged_report(), details=False) == snapshot("""\
Task     Kind        Verdict  Passed  pass@1  pass^1  Notes
france   capability  ✓ pass      2/2  100.0%  100.0%
germany  capability  ✓ pass      1/1  100.0%  100.0%

trialkit · capitals · capability · run run-9c1d · model openai/gpt-4o-mini
Tasks                        2: 2 passed, 0 failed, 0 errored
Trials                       3: 3 passed, 0 failed, 0 errored
Pass rate (mean over tasks)  100.0% (95% CI 43.9%–100.0%)
pass@1                       100.0%
pass^1                       100.0%
Flakiness                    0.0% (0 flaky tasks)
Errors                       0 of 3 trials
Mean score                   0.900
Latency p50 / p95            1.00 s / 1.00 s
Tokens                       510 (agent 300 in / 60 out; graders 120 in / 30 out)
Cost                         $0.0054 (graders $0.0024)
Duration                     42.00 s
started 2026-11-29T12:00:00+00:00
Stopped: the budget of $0.005 ran out after 3 of 6 trials
""")


def test_an_interrupted_run_says_so_after_the_summary() -> None:
    run = RunInfo(id="r1", started_at=STARTED, finished_at=FINISHED, status="interrupted")

    text = render(make_report({"t": [result(0, Verdict.PASS)]}, run=run))

    assert text.endswith("Interrupted: only the trials that finished are counted\n")


def test_a_completed_run_has_no_ending_line() -> None:
    text = render(capability_report())

    assert "Stopped" not in text
    assert "Interrupted" not in text


def test_a_big_run_lists_the_tasks_that_need_a_look_and_counts_the_rest() -> None:
    tasks = {f"task-{i:03}": [result(0, Verdict.PASS)] for i in range(250)}
    tasks["task-200"] = [result(0, Verdict.FAIL)]
    tasks["task-240"] = [result(0, Verdict.PASS), result(1, Verdict.FAIL)]  # flaky
    text = render(make_report(tasks), details=False)
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("task-")]
    assert len(rows) == 100
    assert rows[:98] == [f"task-{i:03}" for i in range(98)]
    assert rows[98:] == ["task-200", "task-240"]  # in the report's order, after the others
    assert "… and 150 more tasks (all passed): `trialkit report run-7f3a --format md`" in text


def test_a_run_of_many_failing_tasks_lists_failures_before_passes() -> None:
    tasks = {f"task-{i:03}": [result(0, Verdict.PASS)] for i in range(150)}
    for i in range(0, 150, 2):
        tasks[f"task-{i:03}"] = [result(0, Verdict.FAIL)]
    text = render(make_report(tasks), details=False)
    rows = [line.split() for line in text.splitlines() if line.startswith("task-")]
    assert len(rows) == 100
    assert sum("fail" in " ".join(r) for r in rows) == 75  # every failed task is listed
    assert "… and 50 more tasks (all passed)" in text
