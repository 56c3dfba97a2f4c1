"""The one path every model call takes: cassette, limits, retries, usage, cost, transcript.

`get_model` wraps each provider in a `ManagedModel`, so an agent, a harness or a judge that
calls `await model.generate(request)` inside a trial gets all of this without asking.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from trialkit._errors import cause, describe
from trialkit.capture.scope import own_calls
from trialkit.models.base import (
    ErrorKind,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    key_of,
)
from trialkit.models.context import current_role, current_settings
from trialkit.models.pricing import cost_of
from trialkit.models.retry import RateLimit, RetryPolicy
from trialkit.secrets import redact, redact_data
from trialkit.transcript import ModelCall, current_recorder

if TYPE_CHECKING:
    from trialkit.models.cassette import Cassette


class ManagedModel(Model):
    """A provider with trialkit's call discipline around it. Same interface as `Model`.

    `max_concurrency` caps calls in flight to this model; `rpm` / `tpm` cap requests and
    tokens per minute. The retry policy and the cassette come from the run's settings.
    """

    def __init__(
        self,
        inner: Model,
        *,
        max_concurrency: int | None = None,
        rpm: float | None = None,
        tpm: float | None = None,
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.inner = inner
        self.provider = inner.provider
        self.name = inner.name
        self.max_concurrency = max_concurrency
        self._limiter: anyio.CapacityLimiter | None = None
        self._rpm = RateLimit(rpm) if rpm else None
        self._tpm = RateLimit(tpm) if tpm else None

    @property
    def supports_structured_output(self) -> bool:
        return self.inner.supports_structured_output

    def classify(self, exc: BaseException) -> tuple[ErrorKind, float | None, int | None]:
        return self.inner.classify(exc)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def generate(self, request: ModelRequest) -> ModelResponse:
        settings = current_settings()
        recorder = current_recorder()
        canonical = request.canonical(self.id)
        key = key_of(canonical)
        trial = recorder.trial_index if recorder else 0
        occurrence = recorder.next_occurrence(key) if recorder else 0
        call = ModelCall(model=self.id, role=current_role(), request=canonical, key=key)
        cassette = settings.cassette
        started = time.perf_counter()
        try:
            response = self._replay(cassette, request, key, trial, occurrence)
            if response is not None:
                call.replayed = True
            else:
                if cassette is not None and cassette.mode == "replay":
                    task_id = recorder.task_id if recorder else ""
                    raise cassette.miss(
                        self.id, request, task_id=task_id, trial=trial, occurrence=occurrence
                    )
                response, call.retries = await self._call(request, settings.retry)
                response.latency_s = time.perf_counter() - started
                if cassette is not None and cassette.mode in ("record", "auto"):
                    await anyio.to_thread.run_sync(
                        lambda: cassette.record(
                            self.id, request, response, trial=trial, occurrence=occurrence
                        )
                    )
        except BaseException as exc:
            call.latency_s = time.perf_counter() - started
            if isinstance(exc, ModelError):
                call.retries = exc.attempts - 1
            if isinstance(exc, Exception):
                call.error = redact(f"{type(exc).__name__}: {exc}")
                if recorder is not None:
                    recorder.add_model_call(call)
            raise
        call.latency_s = response.latency_s
        call.response = redact_data(response.model_dump(mode="json"))
        call.usage = response.usage
        call.cost_usd = cost_of(self.id, response.usage)
        if recorder is not None:
            recorder.add_model_call(call)
        return response

    def _replay(
        self,
        cassette: Cassette | None,
        request: ModelRequest,
        key: str,
        trial: int,
        occurrence: int,
    ) -> ModelResponse | None:
        if cassette is None or cassette.mode not in ("replay", "auto"):
            return None
        return cassette.lookup(self.id, request, trial=trial, occurrence=occurrence, key=key)

    async def _call(self, request: ModelRequest, policy: RetryPolicy) -> tuple[ModelResponse, int]:
        """The provider's answer and how many retries it took; `ModelError` when it gives up."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(request, policy), attempt - 1
            except Exception as exc:
                leaf = cause(exc)  # what a provider's own task group wrapped
                kind, retry_after, status = self.inner.classify(leaf)
                if isinstance(leaf, TimeoutError):
                    kind = ErrorKind.TRANSIENT
                if kind is ErrorKind.PERMANENT or attempt >= policy.attempts:
                    raise _give_up(self.id, exc, kind, status, attempt) from exc
                await anyio.sleep(policy.delay(attempt, retry_after))

    async def _attempt(self, request: ModelRequest, policy: RetryPolicy) -> ModelResponse:
        if self._rpm is not None:
            await self._rpm.acquire()
        if self._tpm is not None:
            await self._tpm.wait_positive()
        limiter = self._concurrency()
        if limiter is None:
            response = await self._timed(request, policy)
        else:
            async with limiter:
                response = await self._timed(request, policy)
        if self._tpm is not None:
            self._tpm.charge(response.usage.total_tokens)
        return response

    async def _timed(self, request: ModelRequest, policy: RetryPolicy) -> ModelResponse:
        with anyio.move_on_after(policy.timeout), own_calls():  # recorded here, not twice
            return await self.inner.generate(request)
        raise TimeoutError(f"no answer within {policy.timeout:g} s")

    def _concurrency(self) -> anyio.CapacityLimiter | None:
        if self.max_concurrency is None:
            return None
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        return self._limiter


def _give_up(
    model_id: str, exc: Exception, kind: ErrorKind, status: int | None, attempts: int
) -> ModelError:
    what = f"HTTP {status}: " if status is not None else ""
    detail = describe(exc)[1]
    own = f"{model_id}: "
    if detail.startswith(own):  # the provider named the model already: say it once
        detail = detail[len(own) :]
    if kind is ErrorKind.PERMANENT:
        hint = _HINTS.get(status or 0, "")
        message = f"{own}{what}{detail}{hint}"
    else:
        message = f"{own}gave up after {attempts} attempts: {what}{detail}"
    return ModelError(redact(message), model=model_id, kind=kind, status=status, attempts=attempts)


_HINTS = {
    401: " (check the API key for this provider)",
    403: " (the API key lacks access to this model)",
    404: " (check the model name and the base URL)",
}
