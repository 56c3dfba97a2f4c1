"""`LangfuseExporter`: trials as Langfuse traces (over its OTLP endpoint) with their scores.

```python
run_sync(suite, exporters=[LangfuseExporter("https://cloud.langfuse.com", "pk-lf-…", "sk-lf-…")])
```

Spans go to `{base_url}/api/public/otel/v1/traces` like `OtelExporter`'s, with HTTP Basic auth
(public key : secret key) and `x-langfuse-ingestion-version: 4`. Langfuse does not turn the
`gen_ai.evaluation.result` events into scores, so each score is also posted to
`{base_url}/api/public/scores` once its trace was accepted: a numeric score when the grader gave
a value, else a categorical one (its verdict), with the rationale as the comment; plus one
categorical `trialkit.verdict` score per trial. Trace and score ids are derived from the run,
task and trial, so exporting a run again updates it instead of duplicating it.
"""

from __future__ import annotations

import base64
import json
import os
from typing import TYPE_CHECKING, Any

from trialkit._record import clean_text
from trialkit.exporters._genai import Attributes
from trialkit.exporters.otel import OtelExporter
from trialkit.secrets import register_secret

if TYPE_CHECKING:
    import urllib.request

    from trialkit.trial import Trial

OTEL_PATH = "/api/public/otel"
SCORES_PATH = "/api/public/scores"
INGESTION_VERSION = "4"
VERDICT_SCORE = "trialkit.verdict"


class LangfuseExporter(OtelExporter):
    """Sends each trial to Langfuse as a trace with its scores.

    `base_url`, `public_key` and `secret_key` default to `$LANGFUSE_HOST` (or
    `$LANGFUSE_BASE_URL`), `$LANGFUSE_PUBLIC_KEY` and `$LANGFUSE_SECRET_KEY`; a missing one is a
    `ValueError` (there is no default host: nothing is sent anywhere you did not name). After
    `on_run_end`, `scores` counts the scores Langfuse accepted.
    """

    def __init__(
        self,
        base_url: str | None = None,
        public_key: str | None = None,
        secret_key: str | None = None,
        *,
        include_content: bool = False,
        timeout: float = 10.0,
    ) -> None:
        base_url = base_url or _env("LANGFUSE_HOST") or _env("LANGFUSE_BASE_URL")
        public_key = public_key or _env("LANGFUSE_PUBLIC_KEY")
        secret_key = secret_key or _env("LANGFUSE_SECRET_KEY")
        missing = [
            name
            for name, value in (
                ("LANGFUSE_HOST (the Langfuse URL)", base_url),
                ("LANGFUSE_PUBLIC_KEY", public_key),
                ("LANGFUSE_SECRET_KEY", secret_key),
            )
            if not value
        ]
        if missing or base_url is None:
            raise ValueError(f"exporting to Langfuse needs {', '.join(missing)}")
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"Langfuse URL {base_url!r}: expected an http:// or https:// URL")
        self.base_url = base_url.rstrip("/")
        token = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode("ascii")
        self._authorization = f"Basic {token}"
        register_secret(secret_key, token)
        super().__init__(
            self.base_url + OTEL_PATH,
            headers={
                "Authorization": self._authorization,
                "x-langfuse-ingestion-version": INGESTION_VERSION,
            },
            include_content=include_content,
            timeout=timeout,
        )
        self.scores_url = self.base_url + SCORES_PATH
        self.scores = 0
        """Scores Langfuse accepted."""
        self._scores_refused = False
        self._opener: urllib.request.OpenerDirector | None = None

    _env_headers = False

    def _reset(self) -> None:
        super()._reset()
        self.scores = 0
        self._scores_refused = False

    def _root_attributes(self, trial: Trial) -> Attributes:
        tags = [trial.verdict.value]
        if self._suite_id:
            tags.insert(0, self._suite_id)
        return {
            "langfuse.trace.name": trial.label,
            "langfuse.session.id": trial.run_id,
            "langfuse.trace.tags": tags,
            "langfuse.trace.metadata.verdict": trial.verdict.value,
        }

    def _trial_extras(self, trial: Trial, trace_id: str) -> list[Any]:
        bodies: list[dict[str, Any]] = [
            {
                "id": f"{trace_id}-verdict",
                "traceId": trace_id,
                "name": VERDICT_SCORE,
                "value": trial.verdict.value,
                "dataType": "CATEGORICAL",
                "comment": trial.error.summary() if trial.error else None,
            }
        ]
        for number, score in enumerate(trial.scores):
            if score.pending:
                continue  # waiting for a human: no result yet
            body: dict[str, Any] = {
                "id": f"{trace_id}-{number}",
                "traceId": trace_id,
                "name": score.name or f"score-{number}",
                "comment": score.rationale,
                "metadata": {"verdict": score.verdict.value},
            }
            if score.value is not None:
                body.update(value=score.value, dataType="NUMERIC")
            else:
                body.update(value=score.verdict.value, dataType="CATEGORICAL")
            bodies.append(body)
        return [{k: v for k, v in body.items() if v is not None} for body in bodies]

    def _send_extras(self, extras: list[Any]) -> None:
        for body in extras:
            if self._scores_refused:
                return
            problem = self._post_score(body)
            if problem is None:
                self.scores += 1
            else:
                self._scores_refused = True
                self.errors.append(
                    f"Langfuse refused a score at {self.scores_url}: {problem}; "
                    "no more scores were sent"
                )

    def _post_score(self, body: dict[str, Any]) -> str | None:
        """Post one score; `None` when accepted, else what went wrong."""
        import urllib.error
        import urllib.request

        if self._opener is None:
            self._opener = _opener()
        data = clean_text(json.dumps(body, ensure_ascii=False)).encode("utf-8")
        request = urllib.request.Request(
            self.scores_url,
            data=data,
            method="POST",
            headers={"Authorization": self._authorization, "Content-Type": "application/json"},
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            with exc:
                text = exc.read(300).decode("utf-8", "replace").strip()
            return f"HTTP {exc.code}" + (f": {text}" if text else "")
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return f"cannot connect: {reason}"
        return None


def _opener() -> urllib.request.OpenerDirector:
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        """A redirect is an error: following it would send the keys to another address."""

        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(NoRedirects())


def _env(name: str) -> str | None:
    return os.environ.get(name) or None
