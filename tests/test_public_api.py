"""The public API is a promise: changing these lists is a deliberate, reviewed act."""

from types import ModuleType

import trialkit
import trialkit.graders
import trialkit.harness


def test_top_level_exports() -> None:
    assert sorted(trialkit.__all__) == [
        "Artifact",
        "Assertion",
        "Environment",
        "ErrorInfo",
        "FileChange",
        "GradeContext",
        "Grader",
        "Harness",
        "Message",
        "ModelCall",
        "Outcome",
        "Reply",
        "Report",
        "Runner",
        "Score",
        "Session",
        "Suite",
        "SuiteError",
        "SuiteKind",
        "Task",
        "ToolCall",
        "Transcript",
        "Trial",
        "TrialContext",
        "TrialStatus",
        "Turns",
        "Usage",
        "Verdict",
        "WorkspaceDiff",
        "__version__",
        "current_recorder",
        "grader",
        "graders",
        "run_sync",
    ]


def test_graders_exports() -> None:
    assert sorted(trialkit.graders.__all__) == [
        "Control",
        "FunctionGrader",
        "GradeContext",
        "Grader",
        "GraderLike",
        "GraderResult",
        "agent_failed",
        "all_of",
        "any_of",
        "as_grader",
        "choice_answer",
        "contains",
        "contains_all",
        "contains_any",
        "contains_json",
        "duration",
        "equals",
        "file_absent",
        "file_contains",
        "file_exists",
        "file_json",
        "fuzzy_match",
        "grader",
        "human",
        "is_json",
        "json_equals",
        "judge",
        "levenshtein",
        "majority",
        "matches",
        "max_tool_calls",
        "max_turns",
        "mean",
        "no_tool_errors",
        "none_of",
        "not_contains",
        "only_changed",
        "pair_tool_calls",
        "parse_json_output",
        "predicate",
        "probe",
        "shared",
        "starts_with",
        "state",
        "tool_called",
        "tool_not_called",
        "tool_order",
        "unchanged",
        "valid_json",
        "weighted",
    ]


def test_harness_exports() -> None:
    assert sorted(trialkit.harness.__all__) == [
        "AgentOutputError",
        "AgentStartError",
        "ChatHarness",
        "FunctionHarness",
        "GiveUp",
        "Harness",
        "HarnessError",
        "HarnessLike",
        "Reply",
        "Session",
        "SessionHarness",
        "SubprocessAgent",
        "Tool",
        "ToolAgent",
        "ToolArgumentsError",
        "ToolServer",
        "ToolServerError",
        "TrialContext",
        "as_harness",
        "call_tool",
        "recorded",
        "tool_spec",
    ]


def test_view_exports() -> None:
    import trialkit.view

    assert trialkit.view.__all__ == ["ViewServer"]


def test_every_export_exists() -> None:
    import trialkit.analysis
    import trialkit.store
    import trialkit.view

    modules = (trialkit, trialkit.graders, trialkit.harness, trialkit.analysis, trialkit.store)
    for module in (*modules, trialkit.view):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_importing_trialkit_imports_no_heavy_optional_modules() -> None:
    import subprocess
    import sys

    code = (
        "import sys, trialkit; "
        "heavy = [m for m in ('openai', 'anthropic', 'sqlalchemy', 'rich', 'click') "
        "if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_models_exports() -> None:
    import trialkit.models

    assert sorted(trialkit.models.__all__) == [
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
    for name in trialkit.models.__all__:
        assert hasattr(trialkit.models, name)


def _type_checking_origins(module: ModuleType) -> dict[str, str]:
    """Where the imports under `if TYPE_CHECKING:` of `module` take each name from."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(module))
    blocks = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    origins: dict[str, str] = {}
    for node in blocks[0].body:
        if isinstance(node, ast.ImportFrom):
            origins.update({a.asname or a.name: node.module or "" for a in node.names})
        elif isinstance(node, ast.Import):
            origins.update({a.asname or a.name: a.name for a in node.names})
    return origins


def test_lazy_exports_match_what_type_checkers_see() -> None:
    import importlib

    import trialkit.loaders
    import trialkit.reports

    for module in (trialkit, trialkit.loaders, trialkit.reports):
        origins = module._ORIGINS
        assert origins == _type_checking_origins(module), module.__name__
        assert sorted(origins) == sorted(set(module.__all__) - {"__version__"})
        for name, origin in origins.items():
            source = importlib.import_module(origin)
            expected = source if origin == f"{module.__name__}.{name}" else getattr(source, name)
            assert getattr(module, name) is expected, f"{module.__name__}.{name}"


def test_importing_trialkit_imports_none_of_it() -> None:
    import subprocess
    import sys

    code = (
        "import sys, trialkit; print(sorted(m for m in sys.modules if m.startswith('trialkit.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['trialkit._lazy', 'trialkit._moved', 'trialkit._version']"
