"""The model layer: providers behind one small interface, with retries, cassettes and costs.

Each name is imported from its module on first use, so that importing one module of this
package (the capture layer reads `trialkit.models.context`) does not import the whole layer:
`managed` uses the capture layer, which must be importable first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trialkit._lazy import lazy_exports

if TYPE_CHECKING:
    from trialkit.models.base import ErrorKind as ErrorKind
    from trialkit.models.base import ForceTool as ForceTool
    from trialkit.models.base import GenerationConfig as GenerationConfig
    from trialkit.models.base import Model as Model
    from trialkit.models.base import ModelError as ModelError
    from trialkit.models.base import ModelRequest as ModelRequest
    from trialkit.models.base import ModelResponse as ModelResponse
    from trialkit.models.base import ResponseFormat as ResponseFormat
    from trialkit.models.base import ToolSpec as ToolSpec
    from trialkit.models.context import ModelSettings as ModelSettings
    from trialkit.models.context import calls_as as calls_as
    from trialkit.models.context import current_settings as current_settings
    from trialkit.models.context import use_settings as use_settings
    from trialkit.models.managed import ManagedModel as ManagedModel
    from trialkit.models.registry import UnknownModel as UnknownModel
    from trialkit.models.registry import get_model as get_model
    from trialkit.models.retry import RetryPolicy as RetryPolicy
    from trialkit.models.scripted import ScriptedModel as ScriptedModel

_ORIGINS = {
    "ErrorKind": "trialkit.models.base",
    "ForceTool": "trialkit.models.base",
    "GenerationConfig": "trialkit.models.base",
    "ManagedModel": "trialkit.models.managed",
    "Model": "trialkit.models.base",
    "ModelError": "trialkit.models.base",
    "ModelRequest": "trialkit.models.base",
    "ModelResponse": "trialkit.models.base",
    "ModelSettings": "trialkit.models.context",
    "ResponseFormat": "trialkit.models.base",
    "RetryPolicy": "trialkit.models.retry",
    "ScriptedModel": "trialkit.models.scripted",
    "ToolSpec": "trialkit.models.base",
    "UnknownModel": "trialkit.models.registry",
    "calls_as": "trialkit.models.context",
    "current_settings": "trialkit.models.context",
    "get_model": "trialkit.models.registry",
    "use_settings": "trialkit.models.context",
}

__all__ = sorted(_ORIGINS)

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all __getattr__
    __getattr__, __dir__ = lazy_exports(__name__, _ORIGINS)
