"""Run-wide model settings and the caller's role, carried by context variables.

The runner sets them for a run (cassette, retry policy, judge model) and marks grading, so a
model call anywhere inside a trial picks them up without anything being passed around.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from trialkit.models.retry import RetryPolicy

if TYPE_CHECKING:
    from trialkit.models.cassette import Cassette
    from trialkit.transcript import ModelCall

CallRole = Literal["agent", "grader"]


@dataclass
class ModelSettings:
    """What every model call of a run shares."""

    cassette: Cassette | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    default_model: str | None = None
    """`--model` / `TRIALKIT_MODEL`: the model when neither the task nor the suite names one."""
    judge_model: str | None = None
    """`--judge-model`: the model judges use when they name none."""
    capture: bool = True
    """Capture the model calls the agent makes with its own SDK clients (at `httpx` /
    `httpx2`): `--no-capture` / `Runner(capture=False)` turns it off."""
    offline: bool = False
    """`--offline`: refuse every request of a trial to a host that is not this machine."""
    run_calls: list[ModelCall] = field(default_factory=list)
    """Model calls made for the run but for no one trial (a judge's negative controls), so
    their tokens and cost can still be counted."""


_DEFAULT = ModelSettings()
_settings: ContextVar[ModelSettings] = ContextVar("trialkit_model_settings", default=_DEFAULT)
_role: ContextVar[CallRole] = ContextVar("trialkit_call_role", default="agent")


def current_settings() -> ModelSettings:
    return _settings.get()


@contextmanager
def use_settings(settings: ModelSettings) -> Iterator[ModelSettings]:
    token = _settings.set(settings)
    try:
        yield settings
    finally:
        _settings.reset(token)


def current_role() -> CallRole:
    return _role.get()


@contextmanager
def calls_as(role: CallRole) -> Iterator[None]:
    """Tag the model calls made inside the block as the agent's or the graders'."""
    token = _role.set(role)
    try:
        yield
    finally:
        _role.reset(token)
