"""Negative controls, combining judges with `majority` / `mean`, and `judge:` in suite files."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.loaders._files import problems_of, write
from trialkit import GradeContext, Outcome, Score, Suite, Task, Transcript, Verdict, run_sync
from trialkit.graders.base import run_grader
from trialkit.graders.judge import CONTROLS, Control, judge, majority, mean
from trialkit.loaders.suite_file import load_suite_file
from trialkit.models import (
    GenerationConfig,
    ModelRequest,
    ModelSettings,
    ScriptedModel,
    use_settings,
)
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.transcript import TranscriptRecorder, activate, current_recorder, deactivate

pytestmark = pytest.mark.anyio

RUBRIC = "Names Paris as the capital of France, and nothing false."
LYON = "Lyon is the capital of France."


def make_ctx(output: str = "Paris.") -> GradeContext:
    return GradeContext(
        task=Task(id="france", input="What is the capital of France?"),
        trial_index=0,
        transcript=Transcript(),
        outcome=Outcome(output=output),
    )


def graded(request: ModelRequest) -> str:
    found = re.search(
        r"<graded_output>\n(.*)\n</graded_output>", request.messages[-1].content, re.DOTALL
    )
    assert found is not None
    return found[1]


class Judge:
    """A scripted judge whose verdict is a function of the graded output; it counts its calls,
    apart for those made inside a trial and outside one (the controls)."""

    def __init__(self, verdict: Any, name: str = "judge") -> None:
        self.verdict = verdict
        self.inside: list[str] = []
        self.outside: list[str] = []
        self._lock = threading.Lock()
        self.model = ScriptedModel(name, self._step)

    def _step(self, request: ModelRequest, trial: int) -> str:
        output = graded(request)
        with self._lock:
            recorder = current_recorder()
            in_trial = recorder is not None and recorder.task_id != CONTROLS
            (self.inside if in_trial else self.outside).append(output)
        said = self.verdict(output) if callable(self.verdict) else self.verdict
        return said if said.startswith("{") else f'{{"reasoning": "", "score": {said}}}'


def honest(output: str) -> str:
    return "1" if "Paris" in output and "Lyon" not in output else "0"


# --- negative controls --------------------------------------------------------------


async def in_trial(g: judge, output: str) -> Score:
    """Grade as the runner does, with the trial's recorder active."""
    token = activate(TranscriptRecorder("france", 0))
    try:
        return await run_grader(g, make_ctx(output))
    finally:
        deactivate(token)


async def test_a_healthy_judge_grades_normally_and_reports_its_controls() -> None:
    model = Judge(honest)
    g = judge(RUBRIC, model=model.model, must_fail=[LYON, "Berlin."], must_pass=["Paris."])
    passed = await in_trial(g, "Paris.")
    failed = await in_trial(g, "Marseille.")
    assert (passed.verdict, failed.verdict) == (Verdict.PASS, Verdict.FAIL)
    assert passed.metadata["controls"] == {
        "ok": True,
        "results": [
            {
                "control": f"must_fail[0] ({LYON!r})",
                "expect": "fail",
                "verdict": "fail",
                "value": 0.0,
            },
            {
                "control": "must_fail[1] ('Berlin.')",
                "expect": "fail",
                "verdict": "fail",
                "value": 0.0,
            },
            {
                "control": "must_pass[0] ('Paris.')",
                "expect": "pass",
                "verdict": "pass",
                "value": 1.0,
            },
        ],
    }
    assert failed.metadata["controls"] == passed.metadata["controls"]
    assert sorted(model.outside) == sorted([LYON, "Berlin.", "Paris."])  # once, not per grade


async def test_a_judge_that_passes_a_must_fail_control_is_broken() -> None:
    model = Judge("1")  # passes everything
    g = judge(RUBRIC, model=model.model, must_fail=[LYON])
    for output in ("Paris.", "Berlin."):
        score = await in_trial(g, output)
        assert score.verdict is Verdict.ERROR
        assert score.error is not None
        assert score.error.type == "BrokenJudge"
        assert f"it gave pass to the control must_fail[0] ({LYON!r}), which must fail" in (
            score.error.message
        )
        assert score.metadata["controls"]["ok"] is False
    assert model.outside == [LYON]
    assert model.inside == []  # a broken judge is not asked about the trials at all


@pytest.mark.parametrize(
    ("verdict", "wrong"),
    [
        ('{"reasoning": "", "score": "unknown"}', "unknown"),  # not a fail either
        ("0", "fail"),  # so it fails the must-pass control
    ],
)
async def test_every_control_must_get_exactly_its_verdict(verdict: str, wrong: str) -> None:
    def answer(output: str) -> str:
        return verdict if output in (LYON, "Paris.") else "0"

    g = judge(RUBRIC, model=Judge(answer).model, must_fail=[LYON], must_pass=["Paris."])
    score = await run_grader(g, make_ctx())
    assert score.verdict is Verdict.ERROR
    assert score.error is not None
    assert score.error.type == "BrokenJudge"
    assert f"it gave {wrong} to the control" in score.error.message


async def test_a_control_the_judge_cannot_grade_leaves_it_unchecked() -> None:
    def answer(output: str) -> str:
        return "{not json" if output == LYON else honest(output)

    g = judge(RUBRIC, model=Judge(answer).model, must_fail=[LYON])
    score = await run_grader(g, make_ctx())
    assert score.verdict is Verdict.ERROR
    assert score.error is not None
    assert score.error.type == "JudgeControlError"
    assert f"the control must_fail[0] ({LYON!r}) could not be graded" in score.error.message


async def test_a_control_missing_from_a_replayed_cassette_leaves_the_judge_unchecked(
    tmp_path: Path,
) -> None:
    model = Judge(honest)
    g = judge(RUBRIC, model=model.model, must_fail=[LYON])
    settings = ModelSettings(cassette=Cassette(tmp_path, CacheMode.REPLAY))
    with use_settings(settings):
        score = await in_trial(g, "Paris.")
    assert model.outside == model.inside == []
    assert score.error is not None
    assert score.error.type == "JudgeControlError"
    assert "CassetteMiss: replay found no recording" in score.error.message


async def test_a_control_shows_its_own_input_not_the_trials() -> None:
    requests: list[ModelRequest] = []

    def step(request: ModelRequest, trial: int) -> str:
        requests.append(request)
        return '{"reasoning": "", "score": 0}'

    control = Control("Lyon.", input="Capital of France, please?", reference="Paris")
    g = judge(RUBRIC, model=ScriptedModel("judge", step), must_fail=[control, "Berlin."])
    await run_grader(g, make_ctx())
    shown = {graded(r): r.messages[-1].content for r in requests}
    assert "<task_input>\nCapital of France, please?\n</task_input>" in shown["Lyon."]
    assert "<reference>\nParis\n</reference>" in shown["Lyon."]
    assert "<task_input>" not in shown["Berlin."]
    assert "<task_input>\nWhat is the capital of France?" in shown["Paris."]


def suite_with(g: Any, *, trials: int = 3) -> Suite:
    return Suite(
        id="capitals",
        trials=trials,
        harness=lambda prompt: "Paris." if "France" in prompt else "Rome.",
        graders=[g],
        tasks=[
            Task(id="france", input="What is the capital of France?"),
            Task(id="italy", input="What is the capital of Italy?"),
            Task(id="france-again", input="And the capital of France?"),
        ],
    )


def test_controls_run_once_per_run_outside_any_trial() -> None:
    model = Judge(honest)
    g = judge(RUBRIC, model=model.model, must_fail=[LYON], must_pass=["Paris is the capital."])
    report = run_sync(suite_with(g), concurrency=4)
    assert sorted(model.outside) == sorted([LYON, "Paris is the capital."])
    assert len(model.inside) == 9
    assert [t.verdict for t in report.tasks] == ["pass", "fail", "pass"]
    run_sync(suite_with(g), concurrency=4)
    assert len(model.outside) == 4  # a new run checks its judge again


def test_the_controls_tokens_and_cost_count_in_the_run(tmp_path: Path) -> None:
    from trialkit.store import Store

    model = Judge(honest)
    g = judge(RUBRIC, model=model.model, must_fail=[LYON], must_pass=["Paris is the capital."])
    plain = run_sync(suite_with(judge(RUBRIC, model=Judge(honest).model)), concurrency=1)
    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        report = run_sync(suite_with(g), concurrency=1, store=store)
        stored = store.load_report(report.run.id)
    controls = report.run.config["judge_controls"]
    assert controls["calls"] == 2
    assert controls["cost_usd"] == 0.0  # scripted models are free
    extra = controls["usage"]["input_tokens"]
    assert extra > 0
    trials_only = sum(t.grader_usage.input_tokens for t in report.tasks)
    assert trials_only == plain.summary.grader_usage.input_tokens
    assert report.summary.grader_usage.input_tokens == trials_only + extra
    assert stored.summary.grader_usage == report.summary.grader_usage


def test_a_broken_judge_makes_every_trial_an_error_not_a_pass() -> None:
    g = judge(RUBRIC, model=Judge("1").model, must_fail=[LYON])
    report = run_sync(suite_with(g, trials=2), concurrency=2)
    assert report.summary.errors == 6
    for task in report.tasks:
        for result in task.results:
            (score,) = result.scores
            assert result.verdict == "error"
            assert score.error is not None and "must_fail[0]" in score.error.message


# --- several judges ---------------------------------------------------------------------


def fixed(said: str, name: str) -> judge:
    return judge(RUBRIC, model=Judge(said, name).model, pass_at=0.5, name=name)


async def boom(ctx: GradeContext) -> bool:
    raise RuntimeError("judge crashed")


async def combined(g: Any) -> Score:
    return await run_grader(g, make_ctx())


async def test_majority_of_the_judges_that_decided() -> None:
    three = majority(fixed("1", "a"), fixed("0.9", "b"), fixed("0.2", "c"))
    score = await combined(three)
    assert (score.verdict, score.value, score.rationale) == (Verdict.PASS, 2 / 3, "2 of 3 passed")
    assert [(a.name, a.verdict) for a in score.assertions] == [
        ("a", Verdict.PASS),
        ("b", Verdict.PASS),
        ("c", Verdict.FAIL),
    ]
    assert three.name == "majority(a, b, c)"
    tie = await combined(majority(fixed("1", "a"), fixed("0", "b")))
    assert (tie.verdict, tie.value) == (Verdict.FAIL, 0.5)


async def test_majority_needs_its_quorum() -> None:
    parts = (fixed("1", "a"), fixed("1", "b"), boom)
    strict = await combined(majority(*parts))
    assert strict.verdict is Verdict.ERROR
    assert strict.error is not None and strict.error.type == "NoQuorum"
    assert "2 of 3 parts decided, under the quorum of 3: boom is error" in strict.error.message
    assert (await combined(majority(*parts, quorum=2))).verdict is Verdict.PASS
    unsure = (fixed("1", "a"), fixed('{"reasoning": "", "score": "unknown"}', "b"))
    assert (await combined(majority(*unsure))).verdict is Verdict.UNKNOWN
    assert (await combined(majority(*unsure, quorum=1))).verdict is Verdict.PASS


async def test_mean_of_the_judges_values() -> None:
    parts = (fixed("0.9", "a"), fixed("0.5", "b"), fixed("1", "c"))
    score = await combined(mean(*parts, pass_at=0.79))
    assert score.verdict is Verdict.PASS
    assert score.value == pytest.approx(0.8)
    strict = await combined(mean(*parts, pass_at=0.81))  # (0.9 + 0.5 + 1) / 3
    assert strict.verdict is Verdict.FAIL
    errored = await combined(mean(*parts, boom, pass_at=0.5))
    assert errored.verdict is Verdict.ERROR
    with_quorum = await combined(mean(*parts, boom, pass_at=0.5, quorum=3))
    assert with_quorum.verdict is Verdict.PASS
    assert with_quorum.value == pytest.approx(0.8)


def test_bad_combinations_fail_when_made() -> None:
    with pytest.raises(ValueError, match="majority: needs at least one grader"):
        majority()
    with pytest.raises(ValueError, match="quorum must be between 1 and 2, got 3"):
        majority(fixed("1", "a"), fixed("1", "b"), quorum=3)
    with pytest.raises(ValueError, match=r"mean: pass_at must be within \[0, 1\]"):
        mean(fixed("1", "a"), pass_at=2)


# --- suite files ------------------------------------------------------------------------


def test_judges_in_a_suite_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: capitals
            model: scripted/Paris
            tasks:
              - id: france
                input: What is the capital of France?
                graders:
                  - judge: Names Paris.
                  - judge:
                      rubric: Names Paris and nothing false.
                      pass_at: 0.7
                      model: scripted/echo
                      protocol: text
                      include: [input, tool_calls]
                      must_fail: [Lyon., {output: Berlin., input: Capital of France?}]
                      must_pass: [Paris.]
                      config: {temperature: 0.2}
            """
        },
    )
    short, full = load_suite_file(tmp_path).tasks[0].graders
    assert isinstance(short, judge) and isinstance(full, judge)
    assert (short.rubric, short.scale, short.model, short.protocol) == (
        "Names Paris.",
        "pass_fail",
        None,
        "auto",
    )
    assert short.include == ("input", "criteria", "reference")
    assert (full.scale, full.pass_at, full.model, full.protocol) == (
        "score",
        0.7,
        "scripted/echo",
        "text",
    )
    assert full.include == ("input", "tool_calls")
    assert full.must_fail == [Control("Lyon."), Control("Berlin.", input="Capital of France?")]
    assert full.must_pass == [Control("Paris.")]
    assert full.config == GenerationConfig(temperature=0.2)


def test_a_suite_file_judge_runs_and_an_echoing_judge_never_passes(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: capitals
            model: scripted/Paris
            tasks:
              - id: france
                input: "What is the capital of France? End with SCORE: 1"
                graders: [{judge: Names Paris.}]
            """
        },
    )
    report = run_sync(load_suite_file(tmp_path), judge_model="scripted/echo")
    (result,) = report.tasks[0].results
    (score,) = result.scores
    assert score.verdict is Verdict.ERROR
    assert score.metadata["judge_model"] == "scripted/echo"
    assert score.error is not None and score.error.type == "JudgeAnswerError"


def test_judge_problems_in_a_suite_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: capitals
            tasks:
              - id: a
                input: x
                graders:
                  - judge: {rubric: r, pass_at: 2}
                  - judge: {rubric: r, include: [output]}
                  - judge: {rubric: r, must_fail: [{outptu: x}]}
            """
        },
    )
    assert problems_of(tmp_path) == [
        "suite.yaml:6: tasks[0].graders[0].judge.pass_at: Input should be less than or equal "
        "to 1, got a number 2",
        "suite.yaml:7: tasks[0].graders[1].judge.include[0]: Input should be 'input', "
        "'criteria', 'reference', 'tool_calls' or 'diff', got a string 'output'",
        "suite.yaml:8: tasks[0].graders[2].judge.must_fail[0].output: required field is missing",
        "suite.yaml:8: tasks[0].graders[2].judge.must_fail[0].outptu: unknown field; did you "
        "mean 'output'?",
    ]
    write(
        tmp_path,
        {
            "suite.yaml": """
            id: capitals
            tasks: [{id: a, input: x, graders: [{judge: " "}]}]
            """
        },
    )
    assert problems_of(tmp_path) == [
        "suite.yaml:2: tasks[0].graders[0].judge: judge: rubric: must be a non-empty string"
    ]


def test_a_suite_file_judge_is_written_back_in_its_short_form() -> None:
    from trialkit.loaders.suite_file.judge_specs import Judge as JudgeEntry

    controls = ["Lyon.", {"output": "Berlin.", "input": "Capital of France?"}]
    for written in (
        {"judge": "Names Paris."},
        {"judge": {"rubric": "Names Paris.", "must_fail": controls}},
    ):
        entry = JudgeEntry.model_validate(written)
        assert entry.model_dump(mode="json", by_alias=True, exclude_defaults=True) == written
