"""`judge(..., repeats=N)`: every answer kept, the majority decides (a tie is unknown), and the
run, its reports and `consistency` give how often the verdicts flip."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from trialkit import GradeContext, Outcome, Suite, Task, Transcript, Verdict, graders, run_sync
from trialkit.consistency import of_trials, to_config
from trialkit.graders.base import run_grader
from trialkit.graders.judge import judge
from trialkit.models import ModelRequest, ScriptedModel
from trialkit.reports.terminal import render_terminal
from trialkit.run.regrade import regrade_sync
from trialkit.store import Store

RUBRIC = "Names Paris as the capital of France."


def answering(*answers: str) -> ScriptedModel:
    """A judge model giving `answers` in turn, from the top for each output it is shown."""
    asked: dict[tuple[str, int], int] = defaultdict(int)

    def step(request: ModelRequest, trial: int) -> str:
        key = (request.messages[-1].content, trial)
        k = asked[key]
        asked[key] += 1
        return answers[k % len(answers)]

    return ScriptedModel("judge", step)


def said(score: float | str, why: str = "because") -> str:
    return json.dumps({"reasoning": why, "score": score})


def ctx(output: str = "Paris.") -> GradeContext:
    return GradeContext(
        task=Task(id="france", input="What is the capital of France?"),
        trial_index=0,
        transcript=Transcript(),
        outcome=Outcome(output=output),
    )


@pytest.mark.anyio
async def test_every_answer_is_kept_and_the_majority_decides() -> None:
    model = answering(said(1, "names Paris"), said(0, "hedges"), said(1, "fine"))
    score = await run_grader(judge(RUBRIC, model=model, repeats=3), ctx())
    assert score.verdict is Verdict.PASS
    assert score.value == 1.0
    assert score.metadata["repeats"] == 3
    assert score.metadata["rubric"] == RUBRIC
    assert [a["verdict"] for a in score.metadata["answers"]] == ["pass", "fail", "pass"]
    assert score.metadata["answers"][1]["rationale"] == "hedges"
    assert score.rationale == "2 pass, 1 fail of 3 answers: names Paris"
    assert score.metadata["judge_model"] == "scripted/judge"


@pytest.mark.anyio
async def test_a_tie_is_unknown_and_answers_without_a_verdict_do_not_vote() -> None:
    tie = await run_grader(judge(RUBRIC, model=answering(said(1), said(0)), repeats=2), ctx())
    assert tie.verdict is Verdict.UNKNOWN
    assert tie.value is None
    assert "a tie is unknown" in (tie.rationale or "")

    # An unreadable answer is an error and does not vote; two fails outvote one pass.
    mixed = answering("no json here", said(0), said(1), said(0))
    score = await run_grader(judge(RUBRIC, model=mixed, repeats=4, protocol="json"), ctx())
    assert score.verdict is Verdict.FAIL
    assert [a["verdict"] for a in score.metadata["answers"]] == ["error", "fail", "pass", "fail"]
    assert "JudgeAnswerError" in score.metadata["answers"][0]["error"]

    unreadable = answering("no json", "still none")
    score = await run_grader(judge(RUBRIC, model=unreadable, repeats=2), ctx())
    assert score.verdict is Verdict.ERROR
    assert score.error is not None and score.error.type == "JudgeAnswerError"

    unsure = answering(said("unknown", "cannot tell"), "garbled")
    score = await run_grader(judge(RUBRIC, model=unsure, repeats=2), ctx())
    assert score.verdict is Verdict.UNKNOWN


@pytest.mark.anyio
async def test_a_scored_judge_takes_the_median_of_the_voting_values() -> None:
    model = answering(said(0.9), said(0.2), said(0.8))
    score = await run_grader(judge(RUBRIC, model=model, repeats=3, pass_at=0.7), ctx())
    assert (score.verdict, score.value) == (Verdict.PASS, 0.8)
    model = answering(said(0.9), said(0.2), said(0.3))
    score = await run_grader(judge(RUBRIC, model=model, repeats=3, pass_at=0.7), ctx())
    assert (score.verdict, score.value) == (Verdict.FAIL, 0.3)


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True, "3"])
def test_repeats_must_be_a_whole_number_of_at_least_one(repeats: object) -> None:
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        judge(RUBRIC, model="scripted/judge", repeats=repeats)  # type: ignore[arg-type]


def test_one_ask_by_default_and_no_answers_recorded() -> None:
    report = run_sync(
        Suite(
            id="once",
            trials=2,
            harness=lambda prompt: "Paris.",
            tasks=[Task(id="t", input="q", graders=[judge(RUBRIC, model=answering(said(1)))])],
        )
    )
    assert "judge_consistency" not in report.run.config
    assert "Judge consistency" not in report.to_markdown()


def wobbly_judge() -> Callable[[ModelRequest, int], str]:
    """Steady on 'Paris.'; on 'Lyon.' it answers fail, pass, fail (a flip every time)."""
    asked: dict[tuple[str, int], int] = defaultdict(int)

    def step(request: ModelRequest, trial: int) -> str:
        shown = request.messages[-1].content
        key = (shown, trial)
        k = asked[key]
        asked[key] += 1
        if "Lyon." in shown:
            return said([0, 1, 0][k % 3])
        return said(1)

    return step


def test_a_run_keeps_each_judges_flip_rate_and_reports_give_it() -> None:
    model = ScriptedModel("judge", wobbly_judge())
    steady = judge(RUBRIC, model=model, repeats=3, name="capital")
    suite = Suite(
        id="judged",
        trials=2,
        harness=lambda prompt: "Paris." if prompt == "france" else "Lyon.",
        tasks=[
            Task(id="france", input="france", graders=[steady]),
            Task(id="lyon", input="lyon", graders=[steady, graders.contains(".")]),
        ],
    )
    report = run_sync(suite, concurrency=2)
    (kept,) = report.run.config["judge_consistency"]
    assert kept["grader"] == "capital"
    assert kept["rubric"] == RUBRIC
    assert (kept["judged"], kept["flipped"], kept["repeats"]) == (4, 2, 3)
    # Pairs: 4 outputs x 3 pairs; the steady ones agree on 3 each, the flipping ones on 1.
    assert (kept["pairs"], kept["pairs_agreed"]) == (12, 8)
    assert report.task("lyon").failed == 2  # the majority of fail, pass, fail

    markdown = report.to_markdown()
    assert "Judge consistency: capital: asked 3 times per output; verdicts flipped on 2 of 4 " in (
        markdown
    )
    assert "(50.0%), answers agree 66.7%" in markdown
    assert "verdicts flipped on 2 of 4 outputs (50.0%)" in report.to_html()
    console = Console(file=io.StringIO(), width=400, color_system=None)
    render_terminal(report, console)
    assert "verdicts flipped on 2 of 4 outputs (50.0%)" in console.file.getvalue()  # type: ignore[attr-defined]
    summary = json.loads(report.to_json())["summary"]
    (shown,) = summary["judge_consistency"]
    assert shown["flip_rate"] == 0.5
    assert shown["agreement"] == pytest.approx(8 / 12)


def test_consistency_of_stored_trials_matches_the_run(tmp_path: Path) -> None:
    model = ScriptedModel("judge", wobbly_judge())
    suite = Suite(
        id="judged",
        trials=3,
        harness=lambda prompt: "Paris." if prompt == "france" else "Lyon.",
        tasks=[
            Task(id=name, input=name, graders=[judge(RUBRIC, model=model, repeats=3)])
            for name in ("france", "lyon")
        ],
    )
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        report = run_sync(suite, store=store)
        (found,) = of_trials(store.iter_trials(report.run.id))
        assert store.load_report(report.run.id).run.config == report.run.config
    assert (found.judged, found.flipped, found.flip_rate) == (6, 3, 0.5)
    assert report.run.config["judge_consistency"] == [to_config([found])[0]]


def test_a_regrade_counts_the_flips_of_its_own_judges(tmp_path: Path) -> None:
    model = ScriptedModel("judge", wobbly_judge())
    suite = Suite(
        id="judged",
        trials=2,
        harness=lambda prompt: "Lyon.",
        tasks=[Task(id="lyon", input="lyon", graders=[judge(RUBRIC, model=model, repeats=3)])],
    )
    steady = ScriptedModel("steady", lambda request, trial: said(1))
    again = Suite(
        id="judged",
        trials=2,
        harness=lambda prompt: "Lyon.",
        tasks=[Task(id="lyon", input="lyon", graders=[judge(RUBRIC, model=steady, repeats=2)])],
    )
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        first = run_sync(suite, store=store)
        assert first.run.config["judge_consistency"][0]["flipped"] == 2
        regraded = regrade_sync(store, first.run.id, again).report
    (kept,) = regraded.run.config["judge_consistency"]
    assert (kept["judged"], kept["flipped"], kept["repeats"]) == (2, 0, 2)
