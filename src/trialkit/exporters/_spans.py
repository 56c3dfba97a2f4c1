"""OpenTelemetry SDK plumbing for `OtelExporter`; imported only when an exporter is made.

A private `TracerProvider` (never the global one) turns planned spans into SDK spans with the
trial's own timestamps, and a `SpanSink` processor collects them as they end. Trace and span ids
are derived from (run id, task id, trial index), so exporting a run twice sends the same ids and
back ends that upsert by id (Langfuse does) keep one copy.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind, Status, StatusCode

from trialkit._record import clean_text
from trialkit._version import __version__
from trialkit.exporters._genai import Attributes, SpanPlan

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class TrialIds(IdGenerator):
    """Ids derived from a key set before each trial's spans are made (random without one)."""

    def __init__(self) -> None:
        self._seed: bytes | None = None
        self._count = 0
        self._random = RandomIdGenerator()

    def seed(self, *key: str) -> None:
        self._seed = "\x1f".join(key).encode("utf-8", "surrogatepass")
        self._count = 0

    def generate_trace_id(self) -> int:
        if self._seed is None:
            return self._random.generate_trace_id()
        return _nonzero(self._seed + b"\x1etrace", 16)

    def generate_span_id(self) -> int:
        if self._seed is None:
            return self._random.generate_span_id()
        self._count += 1
        return _nonzero(self._seed + b"\x1espan%d" % self._count, 8)


def _nonzero(data: bytes, size: int) -> int:
    value = int.from_bytes(hashlib.sha256(data).digest()[:size], "big")
    return value or 1


class SpanSink(SpanProcessor):
    """Keeps every span that ends, until `take()` hands them over."""

    def __init__(self) -> None:
        self._spans: list[ReadableSpan] = []
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self._spans.append(span)

    def take(self) -> list[ReadableSpan]:
        with self._lock:
            spans, self._spans = self._spans, []
        return spans


class SpanFactory:
    """Makes SDK spans from `SpanPlan`s, with explicit start and end times."""

    def __init__(self) -> None:
        self.ids = TrialIds()
        self.sink = SpanSink()
        self.provider = TracerProvider(
            sampler=ALWAYS_ON,
            resource=_resource(),
            shutdown_on_exit=False,
            id_generator=self.ids,
        )
        self.provider.add_span_processor(self.sink)
        self._tracer = self.provider.get_tracer("trialkit", __version__)
        self._lock = threading.Lock()

    def build(
        self, plan: SpanPlan, *, started_at: datetime, key: Sequence[str]
    ) -> tuple[int, list[ReadableSpan]]:
        """The trace id (an int) and the ended spans of one trial's plan."""
        delta = started_at - _EPOCH
        origin = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
        with self._lock:
            self.ids.seed(*key)
            try:
                root = self._start(plan, origin, Context())
                context = trace_api.set_span_in_context(root, Context())
                for child in plan.children:
                    self._end(child, self._start(child, origin, context), origin)
                self._end(plan, root, origin)
            except BaseException:
                self.sink.take()  # a half-made trace goes nowhere
                raise
            return root.get_span_context().trace_id, self.sink.take()

    def shutdown(self) -> None:
        self.provider.shutdown()

    def _start(self, plan: SpanPlan, origin: int, context: Context) -> trace_api.Span:
        return self._tracer.start_span(
            plan.name,
            context=context,
            kind=_KINDS[plan.kind],
            attributes=_clean(plan.attributes),
            start_time=origin + _ns(plan.start_s),
            record_exception=False,
            set_status_on_exception=False,
        )

    def _end(self, plan: SpanPlan, span: trace_api.Span, origin: int) -> None:
        for event in plan.events:
            span.add_event(event.name, _clean(event.attributes), timestamp=origin + _ns(event.at_s))
        if plan.error is not None:
            span.set_status(Status(StatusCode.ERROR, clean_text(plan.error)))
        span.end(end_time=origin + _ns(plan.end_s))


def _ns(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


def _clean(attributes: Attributes) -> Attributes:
    """Strings with lone surrogates replaced: protobuf refuses them and the batch would fail."""
    cleaned: Attributes = {}
    for key, value in attributes.items():
        if isinstance(value, str):
            cleaned[key] = clean_text(value)
        elif isinstance(value, list):
            cleaned[key] = [clean_text(v) for v in value]
        else:
            cleaned[key] = value
    return cleaned


def _resource() -> Resource:
    """trialkit's own resource; no detectors run, so nothing about the process (its command
    line may hold a header with a key) reaches the traces."""
    return Resource(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or "trialkit",
            "service.version": __version__,
            "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry",
        }
    )
