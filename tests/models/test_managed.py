"""The call discipline around every provider: retries, limits, recording, cost."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from trialkit import Message, Suite, Task, TrialContext, current_recorder, graders, run_sync
from trialkit.models import (
    ErrorKind,
    GenerationConfig,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    RetryPolicy,
    ScriptedModel,
    get_model,
)
from trialkit.models.context import ModelSettings, use_settings
from trialkit.transcript import TranscriptRecorder, Usage, activate, deactivate

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.01, timeout=1.0)


class Transient(Exception):
    pass


class Flaky(Model):
    """Fails `failures` times with a transient error, then answers."""

    provider = "flaky"

    def __init__(
        self,
        failures: int,
        *,
        kind: ErrorKind = ErrorKind.TRANSIENT,
        retry_after: float | None = None,
        status: int | None = 503,
    ) -> None:
        super().__init__("m")
        self.failures = failures
        self.calls = 0
        self.kind = kind
        self.retry_after = retry_after
        self.status = status

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls <= self.failures:
            raise Transient("service unavailable")
        return ModelResponse(
            message=Message(role="assistant", content="ok"),
            usage=Usage(input_tokens=10, output_tokens=2),
        )

    def classify(self, exc: BaseException) -> tuple[ErrorKind, float | None, int | None]:
        if isinstance(exc, Transient):
            return self.kind, self.retry_after, self.status
        return super().classify(exc)


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)])


def call(model: Any, req: ModelRequest | None = None, retry: RetryPolicy = FAST) -> Any:
    async def main() -> Any:
        with use_settings(ModelSettings(retry=retry)):
            return await model.generate(req or request())

    return anyio.run(main)


def test_transient_errors_are_retried() -> None:
    inner = Flaky(failures=2)
    response = call(get_model(inner))
    assert response.text == "ok"
    assert inner.calls == 3


def test_retries_give_up_with_a_clear_error() -> None:
    inner = Flaky(failures=10)
    with pytest.raises(ModelError, match=r"flaky/m: gave up after 3 attempts: HTTP 503") as info:
        call(get_model(inner))
    assert info.value.kind is ErrorKind.TRANSIENT
    assert info.value.attempts == 3
    assert inner.calls == 3


def test_permanent_errors_fail_fast_with_a_hint() -> None:
    inner = Flaky(failures=10, kind=ErrorKind.PERMANENT, status=401)
    with pytest.raises(ModelError, match=r"HTTP 401: .*check the API key") as info:
        call(get_model(inner))
    assert inner.calls == 1
    assert info.value.status == 401


def test_retry_after_is_honoured() -> None:
    inner = Flaky(failures=1, retry_after=0.2)
    started = time.perf_counter()
    call(get_model(inner))
    assert time.perf_counter() - started >= 0.2


def test_backoff_grows_exponentially_with_jitter() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    for attempt, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0)]:
        delays = [policy.delay(attempt, None) for _ in range(50)]
        assert all(full / 2 <= d <= full for d in delays)
        assert len(set(delays)) > 1  # jitter
    assert policy.delay(1, 7.5) == 7.5
    assert RetryPolicy(max_retry_after=3).delay(1, 100) == 3


class Hang(Model):
    provider = "hang"

    async def generate(self, request: ModelRequest) -> ModelResponse:
        await anyio.sleep(30)
        raise AssertionError("unreachable")


def test_a_dead_endpoint_never_hangs_the_call() -> None:
    started = time.perf_counter()
    with pytest.raises(ModelError, match=r"gave up after 2 attempts: no answer within 0\.05 s"):
        call(get_model(Hang("x")), retry=RetryPolicy(attempts=2, base_delay=0.001, timeout=0.05))
    assert time.perf_counter() - started < 1


def test_calls_are_recorded_into_the_current_trial() -> None:
    recorder = TranscriptRecorder("t", 2)
    model = get_model(ScriptedModel("s", ["one", "two"]))

    async def main() -> None:
        token = activate(recorder)
        try:
            await model.generate(request("a"))
            await model.generate(request("a"))
        finally:
            deactivate(token)

    anyio.run(main)
    calls = recorder.transcript.model_calls
    assert [c.response["message"]["content"] for c in calls if c.response] == ["one", "two"]
    assert all(c.model == "scripted/s" and c.role == "agent" for c in calls)
    assert calls[0].key == request("a").key("scripted/s")
    assert calls[0].request["messages"] == [{"role": "user", "content": "a"}]
    assert recorder.transcript.usage.output_tokens == 2
    assert [c.cost_usd for c in calls] == [0.0, 0.0]


def test_failed_calls_are_recorded_with_their_error() -> None:
    recorder = TranscriptRecorder()

    async def main() -> None:
        token = activate(recorder)
        try:
            with use_settings(ModelSettings(retry=FAST)):
                await get_model(Flaky(10)).generate(request())
        finally:
            deactivate(token)

    with pytest.raises(ModelError):
        anyio.run(main)
    (failed,) = recorder.transcript.model_calls
    assert failed.error is not None and failed.error.startswith("ModelError: flaky/m: gave up")
    assert failed.retries == 2
    assert failed.response is None


def test_max_concurrency_per_model() -> None:
    active = peak = 0

    class Slow(Model):
        provider = "slow"

        async def generate(self, request: ModelRequest) -> ModelResponse:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await anyio.sleep(0.01)
            active -= 1
            return ModelResponse(message=Message(role="assistant", content="x"))

    model = get_model(Slow("x"), max_concurrency=2)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(model.generate, request())

    anyio.run(main)
    assert peak == 2


def test_requests_per_minute() -> None:
    model = get_model(ScriptedModel("echo"), rpm=600)  # 10 a second, bucket of 600

    async def main() -> float:
        started = time.perf_counter()
        assert model._rpm is not None
        model._rpm.available = 1  # an almost spent budget
        for _ in range(3):
            await model.generate(request())
        return time.perf_counter() - started

    assert anyio.run(main) >= 0.15


def test_costs_unknown_for_unpriced_models() -> None:
    from trialkit.models.pricing import add_costs, cost_of

    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_of("scripted/echo", usage) == 0.0
    assert cost_of("openai/no-such-model-xyz", usage) is None
    priced = cost_of("openai/gpt-4o-mini", usage)
    assert priced is not None and priced > 0
    cached = cost_of("openai/gpt-4o-mini", usage.model_copy(update={"cache_read_tokens": 900_000}))
    assert cached is not None and cached < priced
    assert add_costs(1.0, None) is None
    assert add_costs(1.0, 2.5) == 3.5


def test_unknown_provider() -> None:
    from trialkit.models import UnknownModel

    with pytest.raises(UnknownModel, match="unknown provider 'nope'"):
        get_model("nope/x")
    with pytest.raises(UnknownModel, match="expected provider/name"):
        get_model("gpt-4o")


def test_grader_calls_are_tagged_and_costed_apart() -> None:
    judge = get_model(ScriptedModel("judge", ["PASS"]))

    async def judged(ctx: Any) -> bool:
        response = await judge.generate(request(ctx.output))
        return response.text == "PASS"

    suite = Suite(
        id="s",
        model=ScriptedModel("agent", ["Paris"]),
        tasks=[Task(id="t", input="capital?", graders=[judged, graders.contains("paris")])],
    )
    report = run_sync(suite)
    result = report.tasks[0].results[0]
    assert result.verdict == "pass"
    assert result.usage.output_tokens == 1  # "Paris" only: the judge's tokens are apart
    assert result.cost_usd == 0.0


def test_agent_code_using_the_model_layer_is_recorded() -> None:
    model = get_model("scripted/echo")
    seen: list[int] = []

    async def agent(prompt: str, ctx: TrialContext) -> str:
        response = await model.generate(
            ModelRequest(
                messages=[Message(role="user", content=prompt)],
                config=GenerationConfig(temperature=0),
            )
        )
        recorder = current_recorder()
        assert recorder is not None
        seen.append(len(recorder.transcript.model_calls))
        return response.text

    report = run_sync(
        Suite(
            id="s",
            harness=agent,
            trials=2,
            tasks=[Task(id="t", input="ping", graders=[graders.equals("ping")])],
        )
    )
    assert report.tasks[0].passed == 2
    assert seen == [1, 1]


class _Grouped(Model):
    """A provider whose SDK runs its request in a task group of its own."""

    provider = "grouped"

    def __init__(self, inner: Exception) -> None:
        super().__init__("m")
        self.inner = inner
        self.calls = 0

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise ExceptionGroup("unhandled errors in a TaskGroup", [self.inner])


@pytest.mark.parametrize(
    ("inner", "attempts", "said"),
    [
        (TimeoutError("no answer in time"), 3, "gave up after 3 attempts: no answer in time"),
        (ValueError("the request is bad"), 1, "grouped/m: the request is bad"),
    ],
)
def test_a_provider_error_inside_a_group_is_classified_and_named_by_its_leaf(
    inner: Exception, attempts: int, said: str
) -> None:
    provider = _Grouped(inner)
    with pytest.raises(ModelError) as raised:
        call(get_model(provider))
    assert provider.calls == attempts  # a timeout is retried, a bad request is not
    assert said in str(raised.value)
    assert "TaskGroup" not in str(raised.value)
