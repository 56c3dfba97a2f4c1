"""Importers: suites from other tools' files (openai/evals, inspect_ai, promptfoo, Hugging Face)."""

from trialkit.loaders.importers._common import ImportFailed, MatchKind
from trialkit.loaders.importers.detect import (
    FORMATS,
    Format,
    detect_and_load,
    detect_format,
    load_import_target,
)
from trialkit.loaders.importers.huggingface import load_hf_dataset
from trialkit.loaders.importers.inspect_samples import SampleFields, load_inspect_samples
from trialkit.loaders.importers.openai_evals import load_openai_evals
from trialkit.loaders.importers.promptfoo import load_promptfoo

__all__ = [
    "FORMATS",
    "Format",
    "ImportFailed",
    "MatchKind",
    "SampleFields",
    "detect_and_load",
    "detect_format",
    "load_hf_dataset",
    "load_import_target",
    "load_inspect_samples",
    "load_openai_evals",
    "load_promptfoo",
]
