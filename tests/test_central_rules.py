"""The rules everything else stands on, pinned over every combination: a trial's and a task's
verdict, the CI gate, and which requests share a cassette recording.

Each rule is written here a second time, as a table or a plain statement, independent of the
code: a change to the code's order or to what it looks at shows up as a mismatch.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.reports._factory import make_report, result
from trialkit import Suite, Task, graders, run_sync
from trialkit._record import ErrorInfo
from trialkit.graders.base import trial_verdict
from trialkit.graders.human import pending_score
from trialkit.models.base import GenerationConfig, ModelRequest, ModelResponse, ToolSpec
from trialkit.models.cassette import CacheMode, Cassette
from trialkit.report import TaskPlan, evaluate_gate, task_verdict
from trialkit.score import Score, Verdict
from trialkit.task import SuiteKind
from trialkit.transcript import Message, ToolCall
from trialkit.trial import TrialStatus

P, F, E, U = Verdict.PASS, Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN
RANK = {F: 0, E: 1, U: 2, P: 3}
"""A trial's checks all must hold: the worst decides, fail before error before unknown."""


def score(verdict: Verdict | str, name: str = "check") -> Score:
    if verdict == "pending":
        return pending_score(name)
    if verdict is E:
        return Score.from_error(ErrorInfo(type="ValueError", message="boom"), name=name)
    return Score(name=name, verdict=verdict, value={P: 1.0, F: 0.0}.get(verdict))  # type: ignore[arg-type]


SCORE_KINDS: list[Verdict | str] = [P, F, E, U, "pending"]


@pytest.mark.parametrize("status", list(TrialStatus))
def test_trial_verdict_over_every_combination_of_checks(status: TrialStatus) -> None:
    for size in range(4):
        for kinds in itertools.product(SCORE_KINDS, repeat=size):
            scores = [score(k, name=f"c{i}") for i, k in enumerate(kinds)]
            as_verdicts = [U if k == "pending" else k for k in kinds]
            if status is not TrialStatus.COMPLETED:
                expected = E  # the trial did not finish: no check can make it anything else
            else:
                expected = min(as_verdicts, key=RANK.__getitem__, default=P)
            assert trial_verdict(status, scores) is expected, (status, kinds)


def test_an_errored_check_beside_an_unknown_one_is_an_error_end_to_end() -> None:
    def boom(ctx: Any) -> bool:
        raise ValueError("the grader broke")

    def cannot_tell(ctx: Any) -> Score:
        return Score(name="judge", verdict=U)

    suite = Suite(
        id="s",
        harness=lambda prompt: prompt,
        tasks=[
            Task(id="eu", input="x", graders=[boom, cannot_tell]),
            Task(id="fe", input="x", graders=[boom, graders.contains("nope")]),
            Task(id="pu", input="x", graders=[graders.contains("x"), cannot_tell]),
        ],
    )
    report = run_sync(suite)
    assert [(t.id, t.results[0].verdict) for t in report.tasks] == [("eu", E), ("fe", F), ("pu", U)]


TRIAL_VERDICTS = [P, F, E, U]


def expected_task(kind: SuiteKind, verdicts: tuple[Verdict, ...]) -> Verdict:
    if not verdicts:
        return E  # nothing was measured
    if kind is SuiteKind.CAPABILITY:  # it can be done: one pass is enough
        for v in (P, F, E):
            if v in verdicts:
                return v
        return U
    return min(verdicts, key=RANK.__getitem__)  # a regression: every trial must pass


@pytest.mark.parametrize("kind", [SuiteKind.CAPABILITY, SuiteKind.REGRESSION])
def test_task_verdict_over_every_combination_of_trials(kind: SuiteKind) -> None:
    for size in range(5):
        for verdicts in itertools.product(TRIAL_VERDICTS, repeat=size):
            assert task_verdict(kind, verdicts) is expected_task(kind, verdicts), verdicts


# -- the gate -----------------------------------------------------------------------------------


def trials_of(letters: str) -> list[Any]:
    return [result(i, {"P": P, "F": F, "E": E, "U": U}[c]) for i, c in enumerate(letters)]


@pytest.mark.parametrize("kind", [SuiteKind.CAPABILITY, SuiteKind.REGRESSION])
@pytest.mark.parametrize("allowance", [0, 1, 0.5])
@pytest.mark.parametrize("min_rate", [None, 0.5, 0.9])
def test_gate_over_every_small_run(
    kind: SuiteKind, allowance: float, min_rate: float | None
) -> None:
    for a, b in itertools.product(["PP", "PF", "FF", "PE", "EE", "PU", "UU"], repeat=2):
        tasks = {"a": trials_of(a), "b": trials_of(b)}
        plans = [TaskPlan(id=t, kind=kind) for t in tasks]
        report = make_report(tasks, kind=kind, plans=plans)
        gate = report.gate(min_pass_rate=min_rate, fail_on_error=allowance)

        letters = a + b
        errors = letters.count("E")
        allowed = allowance * len(letters) if 0 < allowance < 1 else allowance
        # the suite's pass rate is the mean over tasks of each task's rate over its decided trials
        rates = [
            t.count("P") / (t.count("P") + t.count("F")) for t in (a, b) if "P" in t or "F" in t
        ]
        rate = sum(rates) / len(rates) if rates else None
        broken = kind is SuiteKind.REGRESSION and any(
            expected_task(kind, tuple(r.verdict for r in trials)) in (F, U)
            for trials in tasks.values()
        )
        low = min_rate is not None and (rate is None or rate < min_rate)
        expected = 3 if errors > allowed else 1 if (broken or low) else 0

        assert gate.exit_code == expected, (a, b, kind, allowance, min_rate, gate.reasons)
        assert gate.passed == (expected == 0)
        reasons = (errors > allowed) + broken + low
        assert len(gate.reasons) == reasons, gate.reasons  # every reason, whichever decides


# -- cassette keys: equal exactly when the request means the same -------------------------------

texts = st.text(min_size=0, max_size=12)
arguments = st.dictionaries(
    st.sampled_from(["city", "unit", "n"]), texts | st.integers(), max_size=2
)


@st.composite
def requests(draw: st.DrawFn) -> ModelRequest:
    call = ToolCall(id=draw(st.sampled_from(["c1", "c2"])), name=draw(st.sampled_from(["w", "t"])),
                    arguments=draw(arguments))  # fmt: skip
    messages = [Message(role="user", content=draw(texts))]
    if draw(st.booleans()):
        messages += [
            Message(role="assistant", content=draw(texts), tool_calls=[call]),
            Message(role="tool", content=draw(texts), tool_call_id=call.id, name=call.name),
        ]
    tools = [ToolSpec(name="w", description=draw(texts))] if draw(st.booleans()) else []
    temperature = draw(st.sampled_from([None, 0.0, 0.7]))
    return ModelRequest(
        messages=messages, tools=tools, config=GenerationConfig(temperature=temperature)
    )


def with_runtime(request: ModelRequest, seed: int) -> ModelRequest:
    """The same request as a harness may echo it back: tool calls carrying their results and
    timings from the transcript. What the model sees is unchanged."""
    messages = []
    for m in request.messages:
        calls = [
            c.model_copy(
                update={
                    "result": f"result {seed}",
                    "is_error": bool(seed % 2),
                    "turn": seed,
                    "started_at": seed * 0.5,
                    "duration_s": seed * 0.25,
                }
            )
            for c in m.tool_calls
        ]
        messages.append(m.model_copy(update={"tool_calls": calls}))
    return request.model_copy(update={"messages": messages})


def meaning(request: ModelRequest) -> Any:
    """What the model is told, written out by hand: the roles, texts, tool calls (id, name,
    arguments), tool results, tools and settings."""
    return (
        tuple(
            (
                m.role,
                m.content,
                m.name,
                m.tool_call_id,
                tuple((c.id, c.name, repr(sorted(c.arguments.items()))) for c in m.tool_calls),
            )
            for m in request.messages
        ),
        tuple((t.name, t.description) for t in request.tools),
        request.config.temperature,
    )


@settings(max_examples=300, deadline=None)
@given(requests(), requests(), st.integers(min_value=0, max_value=9))
def test_keys_are_equal_exactly_when_the_requests_mean_the_same(
    a: ModelRequest, b: ModelRequest, seed: int
) -> None:
    assert a.key("openai/m") == with_runtime(a, seed).key("openai/m")
    assert (a.key("openai/m") == b.key("openai/m")) == (meaning(a) == meaning(b))
    assert a.key("openai/m") != a.key("openai/other")


def test_earlier_tool_call_arguments_are_part_of_the_key() -> None:
    def asked(city: str) -> ModelRequest:
        call = ToolCall(id="c1", name="weather", arguments={"city": city})
        return ModelRequest(
            messages=[
                Message(role="user", content="Weather?"),
                Message(role="assistant", tool_calls=[call]),
                Message(role="tool", content="sunny", tool_call_id="c1", name="weather"),
            ]
        )

    assert asked("Paris").key("openai/m") != asked("Berlin").key("openai/m")


# -- per-trial replay slots ---------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), min_size=1, max_size=8, unique=True)
)
def test_a_replay_gives_each_trial_and_occurrence_its_own_answer(
    tmp_path_factory: pytest.TempPathFactory, slots: list[tuple[int, int]]
) -> None:
    root = Path(tmp_path_factory.mktemp("cassette"))
    request = ModelRequest(messages=[Message(role="user", content="hi")])
    recorder = Cassette(root, CacheMode.RECORD)
    for trial, occurrence in slots:
        answer = Message(role="assistant", content=f"{trial}/{occurrence}")
        recorder.record("openai/m", request, ModelResponse(message=answer), trial=trial,
                        occurrence=occurrence)  # fmt: skip

    replay = Cassette(root, CacheMode.REPLAY)
    for trial, occurrence in slots:
        found = replay.lookup("openai/m", request, trial=trial, occurrence=occurrence)
        assert found is not None
        assert found.message.content == f"{trial}/{occurrence}"
    for trial, occurrence in itertools.product(range(5), range(3)):
        if (trial, occurrence) not in slots:  # a slot never recorded is a miss, not a neighbour's
            assert replay.lookup("openai/m", request, trial=trial, occurrence=occurrence) is None


def test_a_key_is_stable_across_versions_and_dict_order() -> None:
    """Committed cassettes go on replaying only while the same request hashes the same: the
    canonical form (names, separators, escaping) is pinned by a known key."""

    def request(args: dict[str, Any]) -> ModelRequest:
        call = ToolCall(id="c1", name="weather", arguments=args)
        return ModelRequest(
            messages=[
                Message(role="system", content="Be brief."),
                Message(role="user", content="Wetter in Zürich? ☀"),
                Message(role="assistant", tool_calls=[call]),
                Message(role="tool", content="sunny", tool_call_id="c1", name="weather"),
            ],
            tools=[ToolSpec(name="weather", description="The weather.")],
            config=GenerationConfig(temperature=0.0, max_tokens=64),
        )

    known = "0bdb32c8aefa583ad10f989d4cf459a16c53d151c2b41d7b1cdb8407831b4765"
    assert request({"unit": "C", "city": "Zürich"}).key("openai/gpt-4o-mini") == known
    assert request({"city": "Zürich", "unit": "C"}).key("openai/gpt-4o-mini") == known


def test_the_committed_quickstart_cassette_still_matches_its_requests() -> None:
    root = Path(__file__).resolve().parent.parent / "examples" / "quickstart" / "cassette"
    files = sorted(root.glob("*/*/*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        request = ModelRequest.model_validate(
            {k: v for k, v in data["request"].items() if k not in ("schema_version", "model")}
        )
        assert request.key(data["request"]["model"]) == path.stem, path


def test_the_gate_without_arguments_judges_by_the_runs_own_thresholds() -> None:
    tasks = {"a": trials_of("PF"), "b": trials_of("PE")}
    report = make_report(tasks)
    assert report.gate().exit_code == 3  # by default no error is allowed
    assert evaluate_gate(report).exit_code == 3
    report.run.config["gate"] = {"min_pass_rate": 0.9, "fail_on_error": 1}
    gate = report.gate()
    assert (gate.exit_code, gate.min_pass_rate, gate.fail_on_error) == (1, 0.9, 1)
    # the mean over tasks: a passed 1 of 2 decided trials, b 1 of 1
    assert gate.reasons == ["pass rate 75.0% is under the minimum 90.0%"]
    assert report.gate(min_pass_rate=None).exit_code == 0  # a threshold given wins


def test_a_run_stopped_by_its_budget_fails_the_gate() -> None:
    report = make_report({"a": trials_of("PP")})
    report.run.status = "stopped"
    report.run.config["stop_reason"] = "the cost budget of $1 was spent"
    gate = report.gate()
    assert gate.exit_code == 1
    assert gate.reasons == ["not every trial ran: the cost budget of $1 was spent"]
