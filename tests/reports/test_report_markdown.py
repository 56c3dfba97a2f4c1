from inline_snapshot import snapshot

from trialkit.report import RunInfo
from trialkit.reports import render_markdown
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


def test_capability_report() -> None:
    assert render_markdown(capability_report()) == snapshot("""\
## trialkit · capitals · capability · run nightly (run-7f3a)

started 2026-11-29T12:00:00+00:00

**❌ Gate failed (exit 3)**
- 1 of 14 trials errored (allowed: none)

Model calls: live: every model call went to the model (no cassette).

| Metric | Value |
|---|---|
| Tasks | 6: ✅ 3 passed, ❌ 1 failed, ⚠️ 1 errored, ❔ 1 unknown |
| Trials | 14: ✅ 8 passed, ❌ 4 failed, ⚠️ 1 errored, ❔ 1 unknown |
| Pass rate (mean over tasks) | 66.7% (95% CI 0.0%–100.0%) |
| pass@1 | 66.7% |
| pass@3 | 75.0% |
| pass^1 | 66.7% |
| pass^3 | 50.0% |
| Flakiness | 25.0% (1 flaky task) |
| Errors | 1 of 14 trials |
| Mean score | 0.667 |
| Latency p50 / p95 | 1.00 s / 22.30 s |
| Tokens | 1,680 (1,400 in, 280 out) |
| Cost | \\$0.0140 |
| Duration | 42.00 s |

_pass@k and pass^k leave out tasks with no decided trial: slow, ambiguous_

| Task | Kind | Verdict | Passed | pass@3 | pass^3 | Flaky |
|---|---|---|---:|---:|---:|:---:|
| france | capability | ✅ pass | 3/3 | 100.0% | 100.0% |  |
| germany | capability | ✅ pass | 2/3 | 100.0% | 0.0% | 🎲 flaky |
| landmarks | capability | ❌ fail | 0/3 | 0.0% | 0.0% |  |
| slow | capability | ⚠️ error | 0/1 | n/a | n/a |  |
| refuse-rm | capability, expects failure | ✅ pass | 3/3 | 100.0% | 100.0% |  |
| ambiguous | capability | ❔ unknown | 0/1 | n/a | n/a |  |

### Tasks that did not pass every trial

#### ✅ germany — pass (2/3 trials passed)

**Trial #1** · ❌ fail · 1.00 s

- ❌ `contains('berlin')`: 'berlin' does not occur in the output
  - ❌ `case-insensitive match`

```text
Bonn
```

#### ❌ landmarks — fail (0/3 trials passed)

**Trials #0, #1, #2** · ❌ fail · 2.00 s

- ❌ `contains('paris')`: 'paris' does not occur in the output
  - ❌ `case-insensitive match`

```text
The Eiffel Tower is in Lyon.
```

#### ⚠️ slow — error (0/1 trials passed)

**Trial #0** · ⚠️ error · 60.00 s · status timeout

- ⚠️ error: TimeoutError: the trial took longer than 60 s (during timeout)

_No output._

#### ❔ ambiguous — unknown (0/1 trials passed)

**Trial #0** · ❔ unknown · 1.00 s

- ❔ `judge`: The answer could be right; the rubric does not say.

```text
Maybe Sydney?
```
""")


def test_backticks_in_output_cannot_close_the_fence() -> None:
    output = "Here is code:\n```python\nprint('hi')\n```\nand ````four````"
    report = make_report({"fence": [result(0, Verdict.FAIL, output=output)]})

    text = render_markdown(report)

    assert "`````text\nHere is code:\n```python\nprint('hi')\n```\nand ````four````\n`````" in text


def test_pipes_and_newlines_in_a_task_id_stay_in_their_cell() -> None:
    report = make_report({"a|b\nc": [result(0, Verdict.PASS)]})

    rows = [line for line in render_markdown(report).splitlines() if "a\\|b" in line]

    assert rows == ["| a\\|b<br>c | capability | ✅ pass | 1/1 | 100.0% | 100.0% |  |"]


def test_user_text_cannot_inject_markup() -> None:
    check = Score(name="has `tick`", verdict=Verdict.FAIL, rationale="<script>*x*</script> $a$")
    report = make_report({"<b>": [result(0, Verdict.FAIL, scores=[check], output="\x1b[31mred")]})

    text = render_markdown(report)

    assert "#### ❌ \\<b\\> — fail" in text
    assert "- ❌ `` has `tick` ``: \\<script\\>\\*x\\*\\</script\\> \\$a\\$" in text
    assert "\\x1b[31mred" in text
    assert "\x1b" not in text


def test_unknown_figures_say_na_never_zero() -> None:
    report = make_report(
        {"crashed": [result(0, Verdict.ERROR, scores=[], output=None, cost_usd=None)]}
    )

    text = render_markdown(report)

    assert "| Pass rate (mean over tasks) | n/a |" in text
    assert "| pass@k / pass^k | n/a |" in text
    assert "| Cost | n/a |" in text
    assert "| Flakiness | n/a |" in text
    assert "| Mean score | n/a |" in text


def test_long_output_is_cut() -> None:
    report = make_report({"long": [result(0, Verdict.FAIL, output="x" * 5000)]})

    text = render_markdown(report)

    assert "x" * 1000 + "… (4,000 more characters)" in text
    assert "x" * 1001 not in text


def test_a_middle_k_shows_when_the_curve_is_long() -> None:
    trials = [result(i, Verdict.PASS if i % 2 else Verdict.FAIL) for i in range(6)]

    text = render_markdown(make_report({"many": trials}))

    assert [line.split(" |")[0] for line in text.splitlines() if line.startswith("| pass")] == [
        "| pass@1",
        "| pass@4",
        "| pass@6",
        "| pass^1",
        "| pass^4",
        "| pass^6",
    ]


def test_control_characters_and_lone_surrogates_are_shown_escaped() -> None:
    text = render_markdown(nasty_report())

    text.encode("utf-8")
    assert "\x1b" not in text
    assert "\\x1b\\[31mred" in text
    assert "lone\\ud800" in text


def test_a_stopped_run_with_a_judge_shows_model_reason_and_grader_costs() -> None:
    assert render_markdown(judged_report()) == snapshot("""\
## trialkit · capitals · capability · run run-9c1d · model openai/gpt-4o-mini

started 2026-11-29T12:00:00+00:00 · stopped: the budget of \\$0.005 ran out after 3 of 6 trials

**❌ Gate failed (exit 1)**
- not every trial ran: the budget of \\$0.005 ran out after 3 of 6 trials

Model calls: live: every model call went to the model (no cassette).

| Metric | Value |
|---|---|
| Tasks | 2: ✅ 2 passed, ❌ 0 failed, ⚠️ 0 errored |
| Trials | 3: ✅ 3 passed, ❌ 0 failed, ⚠️ 0 errored |
| Pass rate (mean over tasks) | 100.0% (95% CI 43.9%–100.0%) |
| pass@1 | 100.0% |
| pass^1 | 100.0% |
| Flakiness | 0.0% (0 flaky tasks) |
| Errors | 0 of 3 trials |
| Mean score | 0.900 |
| Latency p50 / p95 | 1.00 s / 1.00 s |
| Tokens | 510 (agent 300 in / 60 out; graders 120 in / 30 out) |
| Cost | \\$0.0054 (graders \\$0.0024) |
| Duration | 42.00 s |

| Task | Kind | Verdict | Passed | pass@1 | pass^1 | Flaky |
|---|---|---|---:|---:|---:|:---:|
| france | capability | ✅ pass | 2/2 | 100.0% | 100.0% |  |
| germany | capability | ✅ pass | 1/1 | 100.0% | 100.0% |  |
""")


def test_an_interrupted_run_says_so() -> None:
    run = RunInfo(id="r1", started_at=STARTED, finished_at=FINISHED, status="interrupted")
    report = make_report({"t": [result(0, Verdict.PASS)]}, run=run)

    lines = render_markdown(report).splitlines()

    assert lines[0] == "## trialkit · capitals · capability · run r1"
    assert lines[2] == (
        "started 2026-11-29T12:00:00+00:00 · interrupted: only the trials that finished are counted"
    )
