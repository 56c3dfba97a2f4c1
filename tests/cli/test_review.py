"""`trialkit review RUN`: the terminal loop over the trials that wait for a reviewer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.cli.review import REVIEWER_ENV_VAR
from trialkit.graders.human import REVIEW_TAG, human
from trialkit.score import Verdict
from trialkit.store import Store


def agent(prompt: str) -> str:
    if "France" in prompt:
        return "Paris, obviously."
    if "Peru" in prompt:
        return "Lima."
    return "I would rather not."


@dataclass
class Stored:
    url: str
    run_id: str


@pytest.fixture
def stored(tmp_path: Path) -> Stored:
    """A regression run: "france" and "peru" wait for a reviewer, "plain" passed."""
    url = f"sqlite:///{tmp_path}/store.db"
    suite = Suite(
        id="capitals",
        kind="regression",
        harness=agent,
        tasks=[
            Task(
                id="france",
                input="Capital of France?",
                criteria="Names Paris, politely.",
                graders=[graders.contains("paris"), human(instructions="Is the tone polite?")],
            ),
            Task(id="peru", input="Capital of Peru?", tags=[REVIEW_TAG], graders=[human()]),
            Task(id="plain", input="Capital of France?", graders=[graders.contains("paris")]),
        ],
    )
    report = run_sync(suite, store=url, name="nightly")
    return Stored(url=url, run_id=report.run.id)


def review(stored: Stored, answers: str, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        cli, ["review", "nightly", *args, "--store", stored.url], input=answers, env=env
    )


def test_the_review_shows_what_the_reviewer_needs(stored: Stored) -> None:
    result = review(stored, "q\n")

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "2 reviews to do in run" in out
    assert "[1/2] france#0 · grader human · now ? unknown" in out
    assert "input: Capital of France?" in out
    assert "criteria: Names Paris, politely." in out
    assert "1 turn · 0 tool calls" in out
    assert "output: Paris, obviously." in out
    assert "✓ pass contains('paris')" in out
    assert "Is the tone polite?" in out
    assert "[p]ass / [f]ail / [u]nknown / [s]kip / [q]uit" in out
    assert "peru#0" not in out  # quit before it


def test_pass_one_fail_one_then_quit_stores_labels_and_updates_the_report(
    stored: Stored,
) -> None:
    before = datetime.now(UTC)

    result = review(stored, "p\n0.9\nwarm and right\nf\n\nwrong tone\n", "--reviewer", "ana")

    assert result.exit_code == 0, result.output
    assert "saved: france#0 pass" in result.stdout
    assert "saved: peru#0 fail" in result.stdout
    assert "labelled 2 trials (1 pass, 1 fail); 0 reviews still pending" in result.stdout
    with Store(stored.url) as store:
        labels = store.labels(stored.run_id)
        report = store.load_report(stored.run_id)
    assert [(lb.task_id, lb.verdict, lb.score, lb.reviewer, lb.comment) for lb in labels] == [
        ("france", "pass", 0.9, "ana", "warm and right"),
        ("peru", "fail", 0.0, "ana", "wrong tone"),
    ]
    for lb in labels:
        assert lb.labeled_at is not None
        assert before - timedelta(seconds=1) <= lb.labeled_at <= datetime.now(UTC)
    verdicts = {t.id: t.verdict for t in report.tasks}
    assert verdicts == {"france": Verdict.PASS, "peru": Verdict.FAIL, "plain": Verdict.PASS}
    s = report.summary
    assert (s.passed, s.failed, s.unknown, s.pending) == (2, 1, 0, 0)
    assert s.pass_rate == pytest.approx(2 / 3)


def test_the_report_command_shows_the_labels(stored: Stored) -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["report", "nightly", "--format", "json", "--store", stored.url])
    assert json.loads(shown.stdout)["summary"]["pending"] == 2
    table = runner.invoke(cli, ["report", "nightly", "--store", stored.url])
    assert f"Pending review: 2 of 3 trials (trialkit review {stored.run_id})" in table.stdout

    review(stored, "p\n\n\np\n\n\n")

    after = json.loads(
        runner.invoke(cli, ["report", "nightly", "--format", "json", "--store", stored.url]).stdout
    )
    assert after["summary"]["pending"] == 0
    assert after["summary"]["pass_rate"] == 1.0
    table = runner.invoke(cli, ["report", "nightly", "--store", stored.url])
    assert "Pending review" not in table.stdout


def test_quit_keeps_what_was_saved_and_the_next_review_goes_on(stored: Stored) -> None:
    first = review(stored, "p\n\n\nq\n")
    assert first.exit_code == 0
    assert "labelled 1 trial (1 pass); 1 review still pending" in first.stdout

    second = review(stored, "q\n")

    assert "1 review to do" in second.stdout
    assert "[1/1] peru#0" in second.stdout


def test_an_interrupted_review_keeps_what_was_saved(stored: Stored) -> None:
    result = review(stored, "f\n\n\n")  # the input ends: what Ctrl-C does to a prompt

    assert result.exit_code == 130
    assert "interrupted: every answer given so far is saved" in result.stderr
    with Store(stored.url) as store:
        assert [lb.task_id for lb in store.labels(stored.run_id)] == ["france"]
        assert len(store.pending_reviews(stored.run_id)) == 1


def test_skip_leaves_the_trial_pending(stored: Stored) -> None:
    result = review(stored, "s\nu\n\ncannot tell\n")

    assert "labelled 1 trial (1 unknown), 1 skipped; 1 review still pending" in result.stdout
    with Store(stored.url) as store:
        assert [p.task_id for p in store.pending_reviews(stored.run_id)] == ["france"]
        trial = store.load_trial(stored.run_id, "peru", 0)
    assert trial.verdict is Verdict.UNKNOWN
    assert trial.scores[0].rationale == "cannot tell"


def test_a_bad_answer_or_score_is_asked_again(stored: Stored) -> None:
    result = review(stored, "x\np\n1.5\nabc\n0.25\n\nq\n")

    assert result.exit_code == 0, result.output
    assert "1.5 is not within [0, 1]" in result.stdout
    assert "'abc' is not a number" in result.stdout
    with Store(stored.url) as store:
        (only,) = store.labels(stored.run_id)
    assert (only.verdict, only.score) == ("pass", 0.25)


def test_the_reviewer_defaults_to_the_environment(stored: Stored) -> None:
    review(stored, "p\n\n\nq\n", env={REVIEWER_ENV_VAR: "bo"})

    with Store(stored.url) as store:
        (only,) = store.labels(stored.run_id)
    assert only.reviewer == "bo"


def test_grader_selects_the_reviews_of_one_grader(stored: Stored) -> None:
    result = review(stored, "q\n", "--grader", "tone")

    assert result.exit_code == 0
    assert "nothing to review for grader 'tone' in run" in result.stdout


def test_an_unknown_run_is_an_error(stored: Stored) -> None:
    result = CliRunner().invoke(cli, ["review", "nope", "--store", stored.url])
    assert result.exit_code == 2
    assert "no run matches 'nope'" in result.stderr
