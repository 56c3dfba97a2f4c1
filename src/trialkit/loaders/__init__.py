"""Loaders: where suites come from — Python, suite files, and other tools' formats.

Each name is imported on first use, so code that needs only `TargetError` (every command's
error handling) does not load the suite-file machinery.
"""

from typing import TYPE_CHECKING

from trialkit._lazy import lazy_exports

if TYPE_CHECKING:
    from trialkit.loaders.errors import Problem as Problem
    from trialkit.loaders.errors import SuiteFileError as SuiteFileError
    from trialkit.loaders.python import TargetError as TargetError
    from trialkit.loaders.python import load_suite as load_suite
    from trialkit.loaders.suite_file import is_suite_target as is_suite_target
    from trialkit.loaders.suite_file import load_suite_file as load_suite_file
    from trialkit.loaders.suite_file import validate_suite_file as validate_suite_file
    from trialkit.loaders.target import load_target as load_target

_ORIGINS = {
    "Problem": "trialkit.loaders.errors",
    "SuiteFileError": "trialkit.loaders.errors",
    "TargetError": "trialkit.loaders.python",
    "load_suite": "trialkit.loaders.python",
    "is_suite_target": "trialkit.loaders.suite_file",
    "load_suite_file": "trialkit.loaders.suite_file",
    "validate_suite_file": "trialkit.loaders.suite_file",
    "load_target": "trialkit.loaders.target",
}

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

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, _ORIGINS)
