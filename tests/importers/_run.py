"""Running imported suites offline, with models that answer from a table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trialkit import Suite, run_sync
from trialkit.models.base import ModelRequest
from trialkit.models.scripted import ScriptedModel


def answering(answers: Mapping[str, str] | Callable[[str], str]) -> ScriptedModel:
    """A model that answers the last user message from `answers` ("" when it has none)."""

    def step(request: ModelRequest, trial: int) -> str:
        prompt = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        if callable(answers):
            return answers(prompt)
        return answers.get(prompt, "")

    return ScriptedModel("table", step)


def recording(seen: list[ModelRequest], answer: str = "ok") -> ScriptedModel:
    """A model that keeps every request it gets."""

    def step(request: ModelRequest, trial: int) -> str:
        seen.append(request)
        return answer

    return ScriptedModel("recorder", step)


def verdicts(suite: Suite, **options: Any) -> dict[str, str]:
    """Each task's verdict after running `suite` (no store)."""
    report = run_sync(suite, **options)
    return {task.id: task.verdict.value for task in report.tasks}
