"""Loaders: where suites come from — Python, suite files, and other tools' formats."""

from trialkit.loaders.errors import Problem, SuiteFileError
from trialkit.loaders.python import TargetError, load_suite
from trialkit.loaders.suite_file import is_suite_target, load_suite_file, validate_suite_file
from trialkit.loaders.target import load_target

__all__ = [
    "Problem",
    "SuiteFileError",
    "TargetError",
    "is_suite_target",
    "load_suite",
    "load_suite_file",
    "load_target",
    "validate_suite_file",
]
