"""`OtelExporter`: each trial as an OpenTelemetry trace, sent over OTLP/HTTP (protobuf).

```python
run_sync(suite, exporters=[OtelExporter("http://localhost:4318")])
```

One trace per trial, following the GenAI semantic conventions (see `_genai.py`): an
`invoke_agent` root span, a `chat` span per model call, an `execute_tool` span per tool call and
a `gen_ai.evaluation.result` event per score. Message content (prompts, answers, tool arguments
and results) is left out unless `include_content=True`.

The runner's hooks only build spans and queue them; a worker thread posts them to
`{endpoint}/v1/traces` in batches and `on_run_end` waits for it. When the endpoint refuses a
batch (after the SDK's own retries), nothing more is sent and `errors` says why. Needs the
`otel` extra: `pip install 'trialkit[otel]'`.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trialkit.exporters._genai import Attributes, agent_name, plan_trial
from trialkit.exporters.base import Exporter

if TYPE_CHECKING:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import ReadableSpan

    from trialkit.exporters._spans import SpanFactory
    from trialkit.report import RunInfo, SuiteInfo
    from trialkit.trial import Trial

INSTALL_HINT = "pip install 'trialkit[otel]'"
TRACES_PATH = "/v1/traces"
_BATCH_SPANS = 512
"""Spans per OTLP request (a trial's spans always go in one request)."""


def require_sdk() -> None:
    """Raise `ImportError` naming the install command when the OpenTelemetry SDK is missing."""
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"exporting traces needs the OpenTelemetry SDK: {INSTALL_HINT} ({exc})"
        ) from None


def traces_url(endpoint: str) -> str:
    """`{endpoint}/v1/traces`, unless the endpoint already names that path."""
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"OTLP endpoint {endpoint!r}: expected an http:// or https:// URL")
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


@dataclass
class _Item:
    trials: int
    spans: list[ReadableSpan]
    extras: list[Any] = field(default_factory=list)


@dataclass
class _Pipeline:
    factory: SpanFactory
    exporter: OTLPSpanExporter
    queue: queue.Queue[_Item | None]
    log: _ExportLog
    thread: threading.Thread | None = None


class OtelExporter(Exporter):
    """Sends each trial as a trace to an OTLP/HTTP endpoint (e.g. `http://localhost:4318`).

    `headers` go with every request (e.g. an API key) and nowhere else, with those of
    `$OTEL_EXPORTER_OTLP_HEADERS` as the OpenTelemetry SDK does. After `on_run_end`,
    `trials` and `spans` count what the endpoint accepted and `errors` lists what went wrong,
    one line each.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        headers: Mapping[str, str] | None = None,
        include_content: bool = False,
        timeout: float = 10.0,
        max_pending: int = 1000,
    ) -> None:
        require_sdk()
        if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            raise ValueError("OTEL_SDK_DISABLED is true: unset it to export traces")
        self.url = traces_url(endpoint)
        self.include_content = include_content
        self.timeout = timeout
        self.trials = 0
        """Trials whose spans the endpoint accepted."""
        self.spans = 0
        self.errors: list[str] = []
        self._headers = dict(headers or {})
        from trialkit.secrets import register_secret

        register_secret(*self._headers.values())  # they hold keys: never write them
        self._max_pending = max_pending
        self._suite_id: str | None = None
        self._config: dict[str, Any] = {}
        self._pipeline: _Pipeline | None = None
        self._queued = 0
        self._refused = False

    def __repr__(self) -> str:  # headers hold keys: never show them
        return f"{type(self).__name__}({self.url!r})"

    # -- the runner's hooks --------------------------------------------------------------------

    def on_run_start(self, run: RunInfo, suite: SuiteInfo) -> None:
        from trialkit.secrets import redact_data

        self._suite_id = suite.id
        self._config = redact_data(dict(run.config))
        self._start()

    def on_trial(self, trial: Trial) -> None:
        from trialkit.secrets import redact_record

        trial = redact_record(trial)  # no secret leaves in a span, wherever it came from
        pipeline = self._start()
        try:
            plan = plan_trial(
                trial,
                agent=agent_name(self._config, self._suite_id, trial),
                suite_id=self._suite_id,
                include_content=self.include_content,
            )
            plan.attributes.update(self._root_attributes(trial))
            key = (trial.run_id, trial.task_id, str(trial.index))
            trace_id, spans = pipeline.factory.build(plan, started_at=trial.started_at, key=key)
            extras = self._trial_extras(trial, format(trace_id, "032x"))
        except Exception as exc:  # a trace problem must never stop the run
            self.errors.append(f"trial {trial.label}: no trace: {type(exc).__name__}: {exc}")
            return
        self._queued += 1
        pipeline.queue.put(_Item(1, spans, extras))

    def on_run_end(self, run: RunInfo) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is None:
            return
        try:
            pipeline.queue.put(None)
            if pipeline.thread is not None:
                pipeline.thread.join()
        finally:
            pipeline.log.detach()
            pipeline.exporter.shutdown()  # type: ignore[no-untyped-call]
            pipeline.factory.shutdown()
        if self._refused:
            missing = self._queued - self.trials
            self.errors.append(f"{missing} of {self._queued} trials were not sent to {self.url}")

    # -- what LangfuseExporter adds --------------------------------------------------------------

    _env_headers = True
    """Whether `$OTEL_EXPORTER_OTLP_HEADERS` applies (not for Langfuse: they are meant for
    another back end, and may hold its key)."""

    def _reset(self) -> None:
        """Zero the counts as a run starts."""
        self.trials = self.spans = self._queued = 0
        self.errors = []
        self._refused = False

    def _root_attributes(self, trial: Trial) -> Attributes:
        """Extra attributes for a trial's root span."""
        return {}

    def _trial_extras(self, trial: Trial, trace_id: str) -> list[Any]:
        """Whatever must be sent for a trial once its spans are accepted (see `_send_extras`)."""
        return []

    def _send_extras(self, extras: list[Any]) -> None:
        """Send the extras of trials whose spans were accepted; runs on the worker thread."""

    # -- the worker ------------------------------------------------------------------------------

    def _start(self) -> _Pipeline:
        if self._pipeline is not None:
            return self._pipeline
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from trialkit.exporters._spans import SpanFactory

        self._reset()
        with _without_env(() if self._env_headers else _HEADER_VARS):
            exporter = OTLPSpanExporter(
                endpoint=self.url, headers=self._headers, timeout=self.timeout
            )
        pending: queue.Queue[_Item | None] = queue.Queue(maxsize=self._max_pending)
        pipeline = _Pipeline(SpanFactory(), exporter, pending, _ExportLog())
        pipeline.thread = threading.Thread(
            target=self._work, args=(pipeline,), name="trialkit-otlp", daemon=True
        )
        pipeline.thread.start()
        pipeline.log.attach(pipeline.thread)
        self._pipeline = pipeline
        return pipeline

    def _work(self, pipeline: _Pipeline) -> None:
        stop = False
        while not stop:
            first = pipeline.queue.get()
            if first is None:
                return
            batch = [first]
            size = len(first.spans)
            while size < _BATCH_SPANS:
                try:
                    item = pipeline.queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
                size += len(item.spans)
            try:
                self._ship(pipeline, batch)
            except Exception as exc:  # never let the thread die with trials still queued
                self._refused = True
                self.errors.append(f"exporting to {self.url} failed: {type(exc).__name__}: {exc}")

    def _ship(self, pipeline: _Pipeline, batch: list[_Item]) -> None:
        if self._refused:
            return
        from opentelemetry.sdk.trace.export import SpanExportResult

        spans = [span for item in batch for span in item.spans]
        pipeline.log.first = None
        if pipeline.exporter.export(spans) is not SpanExportResult.SUCCESS:
            self._refused = True
            detail = pipeline.log.first or "no detail"
            self.errors.append(f"exporting traces to {self.url} failed: {detail}")
            return
        self.spans += len(spans)
        self.trials += sum(item.trials for item in batch)
        extras = [extra for item in batch for extra in item.extras]
        if extras:
            self._send_extras(extras)


_HEADER_VARS = ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")


@contextmanager
def _without_env(names: tuple[str, ...]) -> Iterator[None]:
    """These environment variables unset for the block (the SDK reads them as it is made)."""
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


class _ExportLog(logging.Handler):
    """Keeps the first problem the OTLP exporter logged from our worker thread, for `errors`.

    While attached, the exporter's own records still reach the application's handlers; when
    nothing is configured they are not printed (our one-line error says it instead).
    """

    _LOGGER = "opentelemetry.exporter"

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.first: str | None = None
        self._thread: int | None = None

    def attach(self, thread: threading.Thread) -> None:
        self._thread = thread.ident
        logging.getLogger(self._LOGGER).addHandler(self)

    def detach(self) -> None:
        logging.getLogger(self._LOGGER).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self._thread and self.first is None:
            message = record.getMessage()
            self.first = message if len(message) <= 300 else message[:300] + "…"
