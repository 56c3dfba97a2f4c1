"""`trialkit agreement RUN`: Krippendorff's alpha of a run's judges (inside a majority too)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from trialkit import Suite, Task, graders, run_sync
from trialkit.cli.main import cli
from trialkit.models import ScriptedModel
from trialkit.store import Store


def judge(name: str, answer: object) -> graders.Grader:
    model = ScriptedModel(name, answer)  # type: ignore[arg-type]
    return graders.judge("Is it right?", model=model, protocol="text")


@pytest.fixture
def run_id(tmp_path: Path) -> str:
    always = judge("j1", lambda request, trial: "SCORE: 1")
    alternating = judge("j2", lambda request, trial: "SCORE: 0" if trial % 2 else "SCORE: 1")
    also = judge("j3", lambda request, trial: "SCORE: 1")
    suite = Suite(
        id="s",
        trials=4,
        harness=lambda prompt: "an answer",
        tasks=[Task(id="t", input="x", graders=[graders.majority(always, alternating, also)])],
    )
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        return run_sync(suite, store=store).run.id


def agreement(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["agreement", *args, "--store", f"sqlite:///{tmp_path / 's.db'}"]
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_judges_of_a_majority_are_the_raters(tmp_path: Path, run_id: str) -> None:
    code, out, err = agreement(tmp_path, run_id)
    assert code == 0, err
    # 4 trials x 3 judges; in 2 trials one judge dissents: o(pass,fail) = o(fail,pass) = 2,
    # n_pass = 10, n_fail = 2, n = 12, so alpha = 1 - 11 * 4 / (2 * 10 * 2) = -0.1.
    assert "alpha  -0.100" in out
    assert "rater  judge('Is it right?', model='scripted/j2')" in out
    assert "over 4 trials with at least two ratings (12 ratings); 0 left out" in out


def test_two_judges_that_always_agree_and_a_gate(tmp_path: Path, run_id: str) -> None:
    j1 = "judge('Is it right?', model='scripted/j1')"
    j3 = "judge('Is it right?', model='scripted/j3')"
    code, out, err = agreement(tmp_path, run_id, "--grader", j1, "--grader", j3)
    assert "alpha  undefined (every value is the same" in out
    code, out, err = agreement(
        tmp_path, run_id, "--grader", j1, "--grader", j3, "--min-alpha", "0.5"
    )
    assert code == 1
    assert "gate failed: alpha undefined is under --min-alpha 0.5" in err


def test_one_rater_is_not_enough(tmp_path: Path, run_id: str) -> None:
    code, _, err = agreement(tmp_path, run_id, "--grader", "nope")
    assert code == 2
    assert "agreement needs at least two raters" in err


# --- judges with names of their own ------------------------------------------------------


def says(score: int) -> ScriptedModel:
    return ScriptedModel(f"says-{score}", [f'{{"reasoning": "", "score": {score}}}'])


def stored(tmp_path: Path, *task_graders: graders.Grader) -> str:
    suite = Suite(
        id="polite",
        harness=lambda prompt: "Certainly, here it is.",
        graders=list(task_graders),
        tasks=[Task(id="t", input="Send me the file.")],
    )
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        return run_sync(suite, store=store).run.id


def test_the_guides_panel_of_named_judges(tmp_path: Path) -> None:
    panel = graders.majority(
        graders.judge("Answers politely.", model=says(1), name="judge a"),
        graders.judge("Answers politely.", model=says(1), name="judge b"),
        graders.judge("Answers politely.", model=says(0), name="judge c"),
    )
    code, out, err = agreement(tmp_path, stored(tmp_path, panel))
    assert code == 0, err
    assert [line for line in out.splitlines() if "rater" in line] == [
        "  rater  judge a",
        "  rater  judge b",
        "  rater  judge c",
    ]


def test_named_judges_in_a_mean_beside_a_grader_that_is_no_judge(tmp_path: Path) -> None:
    panel = graders.mean(
        graders.judge("Answers politely.", model=says(1), name="first"),
        graders.contains("Certainly"),
        graders.judge("Answers politely.", model=says(1), name="second"),
        pass_at=0.5,
        name="politeness",
    )
    code, out, err = agreement(tmp_path, stored(tmp_path, panel))
    assert code == 0, err
    assert "rater  first" in out and "rater  second" in out
    assert "contains" not in out


def test_named_judges_outside_a_vote(tmp_path: Path) -> None:
    code, out, err = agreement(
        tmp_path,
        stored(
            tmp_path,
            graders.judge("Answers politely.", model=says(1), name="polite?"),
            graders.contains("Certainly"),
            graders.judge("Answers politely.", model=says(0), name="courteous?"),
        ),
    )
    assert code == 0, err
    assert [line for line in out.splitlines() if "rater" in line] == [
        "  rater  polite?",
        "  rater  courteous?",
    ]


def test_a_vote_of_graders_that_are_no_judges_has_no_raters(tmp_path: Path) -> None:
    panel = graders.majority(graders.contains("Certainly"), graders.contains("here"))
    code, _, err = agreement(tmp_path, stored(tmp_path, panel))
    assert code == 2
    assert "found no judge scores" in err
