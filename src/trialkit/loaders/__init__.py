"""Loaders: where suites come from."""

from trialkit.loaders.python import TargetError, load_suite

__all__ = ["TargetError", "load_suite"]
