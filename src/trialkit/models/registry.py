"""`get_model("provider/name")`: model ids to managed models."""

from __future__ import annotations

from typing import Any

from trialkit.models.base import Model
from trialkit.models.managed import ManagedModel

PROVIDERS = ("openai", "anthropic", "local", "scripted")


class UnknownModel(ValueError):
    """A model id that names no provider trialkit knows."""


class ModelUnavailable(UnknownModel):
    """A known model that cannot be called here: its SDK, key, extra or weights are missing."""


def get_model(
    model: str | Model,
    *,
    max_concurrency: int | None = None,
    rpm: float | None = None,
    tpm: float | None = None,
    **options: Any,
) -> ManagedModel:
    """A model ready to call: `openai/gpt-4o-mini`, `anthropic/claude-sonnet-4-5`, `scripted/echo`.

    `options` go to the provider (e.g. `base_url`, `api_key`, `timeout`). A `Model` instance
    is wrapped as it is. Every call goes through retries, limits, the run's cassette, and
    is recorded into the current trial's transcript.
    """
    if isinstance(model, ManagedModel):
        return model
    inner = model if isinstance(model, Model) else _provider_model(model, options)
    return ManagedModel(inner, max_concurrency=max_concurrency, rpm=rpm, tpm=tpm)


def check_model_id(model_id: str) -> None:
    """Raise `UnknownModel` unless `model_id` is `provider/name` with a known provider."""
    provider, sep, name = model_id.partition("/")
    if not sep or not name:
        raise UnknownModel(
            f"model {model_id!r}: expected provider/name, e.g. openai/gpt-4o-mini "
            f"(providers: {', '.join(PROVIDERS)})"
        )
    if provider not in PROVIDERS:
        raise UnknownModel(
            f"model {model_id!r}: unknown provider {provider!r} (known: {', '.join(PROVIDERS)})"
        )


def preflight(model: str | Model, *, replaying: bool = False) -> None:
    """Refuse, before a run starts, a model that cannot be called here: an unknown id, a
    provider SDK that is not installed, no API key, for `local/...` the extra or the weights
    missing (DESIGN §6: exit 2, nothing stored, instead of every trial erroring).

    `replaying`: every call will come from a cassette, so only what building the model needs
    is checked (an SDK, but no key, weights or llama.cpp).
    """
    if isinstance(model, str):
        check_model_id(model)
        try:
            model = _provider_model(model, {})
        except ImportError as exc:
            raise ModelUnavailable(str(exc)) from None
    inner = model.inner if isinstance(model, ManagedModel) else model
    problem = inner.unavailable(replaying=replaying)
    if problem is not None:
        raise ModelUnavailable(problem)


def _provider_model(model_id: str, options: dict[str, Any]) -> Model:
    check_model_id(model_id)
    provider, _, name = model_id.partition("/")
    if provider == "openai":
        from trialkit.models.openai import OpenAIModel

        return OpenAIModel(name, **options)
    if provider == "anthropic":
        from trialkit.models.anthropic import AnthropicModel

        return AnthropicModel(name, **options)
    if provider == "local":
        from trialkit.models.local import LocalModel

        return LocalModel(name, **options)
    if provider == "scripted":
        from trialkit.models.scripted import ScriptedModel

        return ScriptedModel(name, **options)
    raise UnknownModel(
        f"model {model_id!r}: unknown provider {provider!r} (known: {', '.join(PROVIDERS)})"
    )
