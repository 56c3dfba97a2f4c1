"""The model layer: providers behind one small interface, with retries, cassettes and costs."""

from trialkit.models.base import (
    ErrorKind,
    ForceTool,
    GenerationConfig,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    ResponseFormat,
    ToolSpec,
)
from trialkit.models.context import ModelSettings, calls_as, current_settings, use_settings
from trialkit.models.managed import ManagedModel
from trialkit.models.registry import UnknownModel, get_model
from trialkit.models.retry import RetryPolicy
from trialkit.models.scripted import ScriptedModel

__all__ = [
    "ErrorKind",
    "ForceTool",
    "GenerationConfig",
    "ManagedModel",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ResponseFormat",
    "RetryPolicy",
    "ScriptedModel",
    "ToolSpec",
    "UnknownModel",
    "calls_as",
    "current_settings",
    "get_model",
    "use_settings",
]
