import threading
import time
from typing import Any

import anyio
import pytest

from trialkit import (
    Environment,
    Message,
    Outcome,
    Reply,
    Runner,
    Suite,
    Task,
    ToolCall,
    TrialContext,
    TrialStatus,
    Turns,
    Usage,
    Verdict,
    current_recorder,
    graders,
    run_sync,
)
from trialkit.reports import _format as f
from trialkit.run.runner import EmptySelection
from trialkit.task import SuiteError
from trialkit.transcript import ModelCall, Turn


def echo(prompt: str) -> str:
    return f"echo: {prompt}"


def suite_of(*tasks: Task, harness: Any = echo, **kw: Any) -> Suite:
    return Suite(id="s", tasks=list(tasks), harness=harness, **kw)


def test_trials_per_task_and_overrides() -> None:
    suite = suite_of(
        Task(id="a", input="x", graders=[graders.contains("echo")]),
        Task(id="b", input="y", trials=4, graders=[graders.contains("echo")]),
        trials=2,
    )
    report = run_sync(suite)
    assert [(t.id, t.trials) for t in report.tasks] == [("a", 2), ("b", 4)]
    assert [r.trial for r in report.task("b").results] == [0, 1, 2, 3]
    assert run_sync(suite, trials=1).summary.trials == 2


def test_fail_and_error_are_kept_apart() -> None:
    def agent(prompt: str) -> str:
        if prompt == "crash":
            raise RuntimeError("agent bug")
        return prompt

    report = run_sync(
        suite_of(
            Task(id="ok", input="paris", graders=[graders.contains("paris")]),
            Task(id="wrong", input="rome", graders=[graders.contains("paris")]),
            Task(id="crash", input="crash", graders=[graders.contains("paris")]),
            harness=agent,
        )
    )
    ok, wrong, crash = report.tasks
    assert (ok.verdict, wrong.verdict, crash.verdict) == (Verdict.PASS, Verdict.FAIL, Verdict.ERROR)
    result = crash.results[0]
    assert result.status is TrialStatus.ERROR
    assert result.error is not None
    assert (result.error.type, result.error.message, result.error.phase) == (
        "RuntimeError",
        "agent bug",
        "agent",
    )
    assert "Traceback" in (result.error.traceback or "")
    assert result.scores == []  # graders do not run when there is nothing to grade
    assert (report.summary.failed, report.summary.errors) == (1, 1)
    assert report.summary.pass_rate == 0.5  # errors are not fails


def test_a_raising_grader_errors_only_its_own_score() -> None:
    def broken(ctx: object) -> bool:
        raise KeyError("missing")

    report = run_sync(
        suite_of(Task(id="t", input="paris", graders=[broken, graders.contains("paris")]))
    )
    scores = report.tasks[0].results[0].scores
    assert [(s.name, s.verdict) for s in scores] == [
        ("broken", Verdict.ERROR),
        ("contains('paris')", Verdict.PASS),
    ]
    assert report.tasks[0].verdict is Verdict.ERROR


def test_grader_fail_outranks_grader_error() -> None:
    report = run_sync(
        suite_of(Task(id="t", input="x", graders=[lambda c: 1 / 0, graders.contains("paris")]))
    )
    assert report.tasks[0].results[0].verdict is Verdict.FAIL


def test_timeout_is_an_error_and_the_run_goes_on() -> None:
    def agent(prompt: str) -> str:
        if prompt == "slow":
            time.sleep(1.0)
        return prompt

    started = time.perf_counter()
    report = run_sync(
        suite_of(
            Task(id="slow", input="slow", timeout=0.1, graders=[graders.contains("slow")]),
            Task(id="fast", input="fast", graders=[graders.contains("fast")]),
            harness=agent,
        )
    )
    assert time.perf_counter() - started < 0.9
    slow = report.task("slow").results[0]
    assert (slow.verdict, slow.status) == (Verdict.ERROR, TrialStatus.TIMEOUT)
    assert slow.error is not None
    assert (slow.error.message, slow.error.phase) == (
        "the trial exceeded its 0.1 s timeout",
        "agent",
    )
    # Reports add the phase: once.
    assert (
        f.error_text(slow.error) == "Timeout: the trial exceeded its 0.1 s timeout (during agent)"
    )
    assert report.task("fast").verdict is Verdict.PASS


def test_expected_failure_semantics() -> None:
    async def agent(prompt: str) -> str | Reply:
        if prompt == "raise":
            raise PermissionError("refused")
        if prompt == "report":
            return Reply(output="cannot", is_error=True, error="refused politely")
        if prompt == "hang":
            await anyio.sleep(5)
        return "done it"

    report = run_sync(
        suite_of(
            Task(id="raises", input="raise", expect="failure"),
            Task(
                id="reports",
                input="report",
                expect="failure",
                graders=[graders.agent_failed("politely")],
            ),
            Task(id="complies", input="comply", expect="failure"),
            Task(id="hangs", input="hang", expect="failure", timeout=0.05),
            harness=agent,
        )
    )
    verdicts = {t.id: t.verdict for t in report.tasks}
    assert verdicts == {
        "raises": Verdict.PASS,
        "reports": Verdict.PASS,
        "complies": Verdict.FAIL,
        "hangs": Verdict.ERROR,  # a timeout never counts as the expected failure
    }
    raised = report.task("raises").results[0]
    assert raised.failed
    assert raised.scores[0].rationale == "PermissionError: refused"


def test_reported_failure_fails_a_task_expected_to_succeed() -> None:
    def agent(prompt: str) -> Reply:
        return Reply(output="gave up", is_error=True, error="tool broke")

    report = run_sync(
        suite_of(Task(id="t", input="x", graders=[graders.contains("gave")]), harness=agent)
    )
    scores = report.tasks[0].results[0].scores
    assert [(s.name, s.verdict) for s in scores] == [
        ("agent_completed", Verdict.FAIL),
        ("contains('gave')", Verdict.PASS),
    ]
    assert scores[0].rationale == "the agent reported failure: tool broke"


def test_a_task_without_graders_passes_when_the_agent_completes() -> None:
    report = run_sync(suite_of(Task(id="t", input="x")))
    assert [(s.name, s.verdict) for s in report.tasks[0].results[0].scores] == [
        ("agent_completed", Verdict.PASS)
    ]


def test_regression_and_capability_task_verdicts() -> None:
    def agent(prompt: str, ctx: TrialContext) -> str:
        return "yes" if ctx.trial_index != 1 else "no"

    tasks = [Task(id="t", input="q", graders=[graders.contains("yes")])]
    cap = run_sync(Suite(id="c", kind="capability", trials=3, harness=agent, tasks=tasks))
    reg = run_sync(Suite(id="r", kind="regression", trials=3, harness=agent, tasks=tasks))
    assert cap.tasks[0].verdict is Verdict.PASS
    assert reg.tasks[0].verdict is Verdict.FAIL
    assert reg.tasks[0].flaky and reg.summary.flakiness_rate == 1.0
    assert reg.gate().exit_code == 1
    assert cap.gate().exit_code == 0
    assert cap.gate(min_pass_rate=0.9).exit_code == 1


def test_mixed_suite_uses_each_tasks_kind() -> None:
    def agent(prompt: str, ctx: TrialContext) -> str:
        return "yes" if ctx.trial_index == 0 else "no"

    report = run_sync(
        Suite(
            id="m",
            kind="mixed",
            trials=2,
            harness=agent,
            tasks=[
                Task(id="cap", input="q", kind="capability", graders=[graders.contains("yes")]),
                Task(id="reg", input="q", kind="regression", graders=[graders.contains("yes")]),
            ],
        )
    )
    assert [(t.kind.value, t.verdict) for t in report.tasks] == [
        ("capability", Verdict.PASS),
        ("regression", Verdict.FAIL),
    ]


def test_concurrency_is_bounded() -> None:
    active = 0
    peak = 0

    async def agent(prompt: str) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await anyio.sleep(0.01)
        active -= 1
        return prompt

    run_sync(suite_of(Task(id="t", input="x", trials=20), harness=agent), concurrency=3)
    assert peak == 3


def test_blocking_agents_run_off_the_event_loop() -> None:
    threads: set[str] = set()

    def agent(prompt: str) -> str:
        threads.add(threading.current_thread().name)
        time.sleep(0.05)
        return prompt

    started = time.perf_counter()
    run_sync(suite_of(Task(id="t", input="x", trials=8), harness=agent), concurrency=8)
    assert threading.main_thread().name not in threads
    assert time.perf_counter() - started < 0.3  # 8 x 50 ms overlapped, not in sequence


def test_multi_turn_session_and_transcript() -> None:
    class Agent:
        def __init__(self) -> None:
            self.heard: list[str] = []
            self.closed = False

        async def send(self, message: str | list[Message]) -> Reply:
            assert isinstance(message, str)
            self.heard.append(message)
            recorder = current_recorder()
            assert recorder is not None
            call = ToolCall(
                id=f"c{len(self.heard)}", name="lookup", arguments={"q": message}, result="found"
            )
            return Reply(
                output=" | ".join(self.heard),
                tool_calls=[call],
                usage=Usage(input_tokens=10, output_tokens=2),
                reasoning=["hmm"],
            )

        def close(self) -> None:
            self.closed = True
            made.append(self)

    made: list[Agent] = []
    suite = suite_of(
        Task(id="t", input=Turns("one", "two"), graders=[graders.equals("one | two")]),
        harness=Agent,
        trials=2,
    )
    seen: list[Any] = []

    class Keep(Environment):
        async def capture(self, world: Any, outcome: Outcome) -> None:
            recorder = current_recorder()
            assert recorder is not None
            seen.append(recorder.transcript.model_copy(deep=True))

    suite.environment = Keep()
    report = run_sync(suite)
    assert report.tasks[0].verdict is Verdict.PASS
    assert len(made) == 2 and all(a.closed for a in made)
    transcript = seen[0]
    assert [(m.role, m.content) for m in transcript.messages] == [
        ("user", "one"),
        ("assistant", "one"),
        ("user", "two"),
        ("assistant", "one | two"),
    ]
    assert [(c.id, c.turn, c.result) for c in transcript.tool_calls] == [
        ("c1", 0, "found"),
        ("c2", 1, "found"),
    ]
    assert [t.output for t in transcript.turns] == ["one", "one | two"]
    assert transcript.usage == Usage(input_tokens=20, output_tokens=4)
    assert [r.turn for r in transcript.reasoning] == [0, 1]
    assert report.tasks[0].usage.input_tokens == 40


def test_the_cost_an_agent_reports_adds_up_over_its_turns() -> None:
    def agent(prompt: str) -> Reply:
        recorder = current_recorder()
        assert recorder is not None
        if prompt == "priced call":
            recorder.add_model_call(ModelCall(model="m/priced", cost_usd=0.125))
        if prompt == "unpriced call":
            recorder.add_model_call(ModelCall(model="m/unpriced"))
        reported = {"a": 0.25, "c": 0.5}.get(prompt[0])
        return Reply(output=prompt, cost_usd=reported)

    def cost_of(*turns: str) -> float | None:
        report = run_sync(suite_of(Task(id="t", input=Turns(*turns)), harness=agent))
        (result,) = report.tasks[0].results
        assert report.tasks[0].cost_usd == result.cost_usd
        return result.cost_usd

    assert cost_of("a", "b", "c") == 0.75  # the turn that reported nothing adds nothing
    assert cost_of("b") is None  # nothing reported, no model call: unknown, not free
    assert cost_of("a", "priced call") == 0.375
    assert cost_of("a", "unpriced call") is None
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Reply(cost_usd=-0.5)
    assert Turn.model_validate({"index": 0, "input": "x"}).cost_usd is None  # older records


def test_recorder_reaches_blocking_agents_in_threads() -> None:
    def agent(prompt: str) -> str:
        recorder = current_recorder()
        assert recorder is not None
        recorder.add_reasoning(f"thinking about {prompt}")
        return "ok"

    class Grab(Environment):
        async def capture(self, world: Any, outcome: Outcome) -> None:
            recorder = current_recorder()
            assert recorder is not None
            outcome.state["reasoning"] = [r.content for r in recorder.transcript.reasoning]

    def check(ctx: Any) -> bool:
        return bool(ctx.outcome.state["reasoning"] == ["thinking about q"])

    suite = suite_of(Task(id="t", input="q", graders=[check]), harness=agent, environment=Grab())
    assert run_sync(suite).tasks[0].verdict is Verdict.PASS
    assert current_recorder() is None


def test_chat_messages_input_reaches_the_agent() -> None:
    received: list[Any] = []

    def agent(messages: list[Message]) -> str:
        received.append(messages)
        return "ok"

    msgs = [Message(role="system", content="Be brief."), Message(role="user", content="Hi")]
    run_sync(suite_of(Task(id="t", input=msgs), harness=agent))
    assert received == [msgs]


class Recording(Environment):
    def __init__(self, fail_in: str | None = None) -> None:
        self.fail_in = fail_in
        self.events: list[str] = []

    async def setup(self, task: Task, trial_index: int) -> Any:
        self.events.append(f"setup {task.id}#{trial_index}")
        if self.fail_in == "setup":
            raise OSError("no disk")
        return {"root": f"/tmp/{task.id}"}

    async def capture(self, world: Any, outcome: Outcome) -> None:
        self.events.append("capture")
        if self.fail_in == "capture":
            raise RuntimeError("gone")
        outcome.state["root"] = world["root"]

    async def teardown(self, world: Any) -> None:
        self.events.append("teardown")


def test_environment_protocol_and_world() -> None:
    env = Recording()

    def agent(prompt: str, ctx: TrialContext) -> str:
        return str(ctx.world["root"])

    suite = suite_of(
        Task(id="t", input="x", graders=[lambda c: c.outcome.state["root"] == c.output]),
        harness=agent,
        environment=env,
    )
    assert run_sync(suite).tasks[0].verdict is Verdict.PASS
    assert env.events == ["setup t#0", "capture", "teardown"]


@pytest.mark.parametrize("phase", ["setup", "capture"])
def test_environment_failures_are_errors(phase: str) -> None:
    env = Recording(fail_in=phase)
    report = run_sync(suite_of(Task(id="t", input="x"), environment=env))
    result = report.tasks[0].results[0]
    assert result.verdict is Verdict.ERROR
    assert result.error is not None and result.error.phase == phase
    assert env.events[-1] == "teardown" if phase == "capture" else "teardown" not in env.events


def test_teardown_runs_after_a_timeout() -> None:
    env = Recording()

    async def agent(prompt: str) -> str:
        await anyio.sleep(5)
        return prompt

    report = run_sync(
        suite_of(Task(id="t", input="x", timeout=0.05), harness=agent, environment=env)
    )
    assert report.tasks[0].results[0].status is TrialStatus.TIMEOUT
    assert env.events == ["setup t#0", "teardown"]


def test_empty_selection_and_missing_harness() -> None:
    suite = suite_of(Task(id="t", input="x"))
    with pytest.raises(EmptySelection, match=r"no tasks matching --task nope; nothing to run"):
        run_sync(suite, task_ids=["nope"])
    with pytest.raises(SuiteError, match="nothing to evaluate: give the agent under test"):
        run_sync(Suite(id="s", tasks=[Task(id="t", input="x")]))


def test_agent_returning_the_wrong_type_is_an_error() -> None:
    report = run_sync(suite_of(Task(id="t", input="x"), harness=lambda p: object()))
    error = report.tasks[0].results[0].error
    assert error is not None and error.type == "AgentOutputError"
    assert "returned object; expected a string" in error.message


def test_dict_answers_become_json() -> None:
    report = run_sync(
        suite_of(
            Task(id="t", input="x", graders=[graders.valid_json(where=lambda v: v == {"a": 1})]),
            harness=lambda p: {"a": 1},
        )
    )
    assert report.tasks[0].verdict is Verdict.PASS


def test_runner_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        Runner(concurrency=0)


def test_a_store_url_keeps_every_trial(tmp_path: Any) -> None:
    from trialkit.store import Store

    path = tmp_path / "runs.db"
    report = run_sync(suite_of(Task(id="t", input="x", trials=3)), store=str(path))
    with Store(f"sqlite:///{path}") as store:
        assert store.load_report(report.run.id).summary.trials == 3


def test_worker_threads_follow_concurrency() -> None:
    barrier = threading.Barrier(48, timeout=5)

    def agent(prompt: str) -> str:
        barrier.wait()  # only returns once 48 agents run at the same time
        return prompt

    report = run_sync(suite_of(Task(id="t", input="x", trials=48), harness=agent), concurrency=48)
    assert report.summary.errors == 0


def test_the_cost_an_agent_reports_counts_against_max_cost() -> None:
    def agent(prompt: str) -> Reply:
        return Reply(output=prompt, cost_usd=0.02)

    report = run_sync(
        suite_of(Task(id="t", input="x"), harness=agent, trials=10), concurrency=1, max_cost=0.05
    )
    assert report.summary.trials == 3  # $0.02 each: the third crosses $0.05
    assert report.run.status == "stopped"
