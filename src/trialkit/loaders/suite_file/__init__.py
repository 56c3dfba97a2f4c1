"""Suite files: `suite.yaml` / `suite.json` folders with `tasks/`, datasets and graders by name.

The file models (`SuiteFile`, `TaskFile`, `DatasetSpec`, the grader entries) are what the files
hold and what importers of other formats produce; `build_suite` makes the runtime `Suite`.
"""

from trialkit.loaders.errors import Problem, SuiteFileError
from trialkit.loaders.suite_file.build import build_suite
from trialkit.loaders.suite_file.context import BuildContext, Locator
from trialkit.loaders.suite_file.entry import GraderEntry
from trialkit.loaders.suite_file.grader_specs import GRADERS, GraderSpec
from trialkit.loaders.suite_file.load import (
    SUITE_FILE_NAMES,
    dump_suite_model,
    is_suite_target,
    load_suite_file,
    load_suite_model,
    save_suite,
    validate_suite_file,
)
from trialkit.loaders.suite_file.models import (
    ChatMessage,
    CommandHarness,
    DatasetSpec,
    EnvironmentSpec,
    HarnessSpec,
    ModelHarness,
    PythonEnvironment,
    PythonHarness,
    SuiteFile,
    TaskFile,
    WorkspaceEnvironment,
)

__all__ = [
    "GRADERS",
    "SUITE_FILE_NAMES",
    "BuildContext",
    "ChatMessage",
    "CommandHarness",
    "DatasetSpec",
    "EnvironmentSpec",
    "GraderEntry",
    "GraderSpec",
    "HarnessSpec",
    "Locator",
    "ModelHarness",
    "Problem",
    "PythonEnvironment",
    "PythonHarness",
    "SuiteFile",
    "SuiteFileError",
    "TaskFile",
    "WorkspaceEnvironment",
    "build_suite",
    "dump_suite_model",
    "is_suite_target",
    "load_suite_file",
    "load_suite_model",
    "save_suite",
    "validate_suite_file",
]
