"""Trials run again after an error are marked, and reports give the first-attempt pass rate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from trialkit import Suite, Task, TrialContext, graders, run_sync
from trialkit.reports.json import write_json_report
from trialkit.reports.terminal import render_terminal
from trialkit.run.regrade import regrade_sync
from trialkit.run.retries import record_retries, retry_note
from trialkit.score import Verdict
from trialkit.store import Store

ATTEMPTS: dict[tuple[str, int], int] = {}


def agent(prompt: str, ctx: TrialContext) -> str:
    """`hard` errors at the first attempt of every trial and passes when run again; `mixed`
    fails its first trial and passes its second; `easy` always passes."""
    key = (prompt, ctx.trial_index)
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if prompt == "hard" and ATTEMPTS[key] == 1:
        raise TimeoutError("the hard input timed out")
    if prompt == "mixed" and ctx.trial_index == 0:
        return "wrong"
    return "ok"


def make_suite() -> Suite:
    return Suite(
        id="retries",
        kind="capability",
        trials=2,
        harness=agent,
        tasks=[
            Task(id=name, input=name, graders=[graders.contains("ok")])
            for name in ("easy", "hard", "mixed")
        ],
    )


@pytest.fixture
def retried_run(tmp_path: Path) -> tuple[Store, str]:
    ATTEMPTS.clear()
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    first = run_sync(make_suite(), store=store, concurrency=1)
    assert first.summary.errors == 2
    assert retry_note(first.run.config) is None
    return store, first.run.id


def test_retried_trials_are_kept_with_their_attempts_and_verdicts(
    retried_run: tuple[Store, str],
) -> None:
    store, run_id = retried_run
    with store:
        report = run_sync(make_suite(), store=store, resume=run_id, retry_errors=True)
        assert report.summary.errors == 0
        # easy 2/2, hard 2/2 (after the retries), mixed 1/2: the mean of task rates.
        assert report.summary.pass_rate == pytest.approx((1 + 1 + 0.5) / 3)
        retried = report.run.config["retried"]
        assert retried["trials"] == [
            {"task": "hard", "trial": 0, "attempts": 2, "verdict": "pass"},
            {"task": "hard", "trial": 1, "attempts": 2, "verdict": "pass"},
        ]
        # First attempts only: hard's errored, so it has no decided trial: (1 + 0.5) / 2.
        assert retried["first_attempt_pass_rate"] == pytest.approx(0.75)
        assert retried["pass_rate"] == pytest.approx(report.summary.pass_rate)

        markdown = report.to_markdown()
        assert "**Retried trials:** 2 trials were run again after an error (2 then passed)" in (
            markdown
        )
        assert "the pass rate reads 75.0%" in markdown and "against 83.3%" in markdown
        html = report.to_html()
        assert "<strong>Retried trials:</strong> 2 trials were run again after an error" in html

        console = Console(file=io.StringIO(), width=400, color_system=None)
        render_terminal(report, console)
        text = console.file.getvalue()  # type: ignore[attr-defined]
        assert "first attempts only the pass rate reads 75.0%" in text

        whole = json.loads(report.to_json())["summary"]
        assert whole["retried_trials"] == 2
        assert whole["first_attempt_pass_rate"] == pytest.approx(0.75)
        assert whole["retried"][0]["attempts"] == 2
        streamed = io.StringIO()
        write_json_report(store, run_id, streamed)
        assert json.loads(streamed.getvalue())["summary"] == whole

        # The stored run keeps them: a later report reads the same.
        again = store.load_report(run_id)
        assert again.run.config["retried"] == retried
        assert retry_note(again.run.config) == retry_note(report.run.config)


def test_a_plain_resume_keeps_the_retries_and_a_second_retry_counts_one_more_attempt(
    retried_run: tuple[Store, str],
) -> None:
    store, run_id = retried_run
    with store:
        run_sync(make_suite(), store=store, resume=run_id, retry_errors=True)
        report = run_sync(make_suite(), store=store, resume=run_id, retry_errors=True)
        # Nothing errored any more: nothing more was retried, the record stands.
        assert [t["attempts"] for t in report.run.config["retried"]["trials"]] == [2, 2]
    previous = report.run.config["retried"]
    verdicts = {("hard", 0): Verdict.FAIL, ("hard", 1): Verdict.PASS, ("easy", 0): Verdict.PASS}
    value = record_retries(previous, {("hard", 0)}, verdicts)
    assert value is not None
    assert value["trials"][0] == {"task": "hard", "trial": 0, "attempts": 3, "verdict": "fail"}
    assert value["first_attempt_pass_rate"] == 1.0  # easy alone
    assert value["pass_rate"] == pytest.approx((1 + 0.5) / 2)


def test_no_note_and_no_fields_when_no_trial_was_retried() -> None:
    assert record_retries(None, set(), {("a", 0): Verdict.PASS}) is None
    ATTEMPTS.clear()
    report = run_sync(make_suite(), concurrency=1)
    assert "Retried" not in report.to_markdown()
    assert "retried_trials" not in json.loads(report.to_json())["summary"]


def stubborn(prompt: str, ctx: TrialContext) -> str:
    """Trial 0 errors at its first two attempts and passes at the third; trial 1 passes."""
    key = (prompt, ctx.trial_index)
    ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
    if ctx.trial_index == 0 and ATTEMPTS[key] <= 2:
        raise ConnectionError("the sandbox did not start")
    return "ok"


def test_the_stored_trial_says_which_attempt_it_is(tmp_path: Path) -> None:
    ATTEMPTS.clear()
    suite = Suite(
        id="stubborn",
        trials=2,
        harness=stubborn,
        tasks=[Task(id="t", input="t", graders=[graders.contains("ok")])],
    )
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run_id = run_sync(suite, store=store, concurrency=1).run.id
        assert [t.attempt for t in store.iter_trials(run_id)] == [1, 1]
        once = run_sync(suite, store=store, resume=run_id, retry_errors=True)
        assert [(t.verdict, t.attempt) for t in store.iter_trials(run_id)] == [
            (Verdict.ERROR, 2),
            (Verdict.PASS, 1),
        ]
        assert once.run.config["retried"]["trials"][0]["attempts"] == 2
        twice = run_sync(suite, store=store, resume=run_id, retry_errors=True)
        assert [(t.verdict, t.attempt) for t in store.iter_trials(run_id)] == [
            (Verdict.PASS, 3),
            (Verdict.PASS, 1),
        ]
        assert twice.run.config["retried"]["trials"] == [
            {"task": "t", "trial": 0, "attempts": 3, "verdict": "pass"}
        ]
        assert "1 trial was run again after an error (1 then passed)" in twice.to_markdown()


def test_a_regrade_keeps_the_attempts_and_reads_the_retries_again(
    retried_run: tuple[Store, str],
) -> None:
    store, run_id = retried_run
    with store:
        run_sync(make_suite(), store=store, resume=run_id, retry_errors=True)
        strict = make_suite()
        for task in strict.tasks:  # the hard task's retries now fail
            task.graders = [graders.contains("ok" if task.id != "hard" else "never")]
        regraded = regrade_sync(store, run_id, strict).report
        new_id = regraded.run.id
        assert [t.attempt for t in store.iter_trials(new_id)] == [1, 1, 2, 2, 1, 1]
    retried = regraded.run.config["retried"]
    assert [t["verdict"] for t in retried["trials"]] == ["fail", "fail"]
    assert retried["pass_rate"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert retried["first_attempt_pass_rate"] == pytest.approx(0.75)
