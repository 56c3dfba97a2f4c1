"""`get_model("provider/name")`: model ids to managed models."""

from __future__ import annotations

from typing import Any

from trialkit.models.base import Model
from trialkit.models.managed import ManagedModel

PROVIDERS = ("openai", "anthropic", "local", "scripted")


class UnknownModel(ValueError):
    """A model id that names no provider trialkit knows."""


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


def preflight(model_id: str, *, replaying: bool = False) -> None:
    """Fail before a run starts when `model_id` cannot be called here (exit 2, not N errors).

    Checks the id, and for `local/...` that the weights and llama.cpp are installed (unless
    every call will be replayed from a cassette).
    """
    check_model_id(model_id)
    provider, _, name = model_id.partition("/")
    if provider == "local" and not replaying:
        from trialkit.models.local import LocalModelError, check_local

        try:
            check_local(name)
        except LocalModelError as exc:
            raise UnknownModel(str(exc)) from None


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
