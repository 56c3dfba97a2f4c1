"""From a `SuiteFile` to a runtime `Suite`: graders, references, datasets, harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trialkit.environments.base import Environment
from trialkit.loaders.errors import FieldPath, SuiteFileError
from trialkit.loaders.suite_file.context import BuildContext, Locator, References
from trialkit.loaders.suite_file.datasets import Row, fill, read_rows
from trialkit.loaders.suite_file.documents import explain, user_path
from trialkit.loaders.suite_file.fields import describe
from trialkit.loaders.suite_file.grader_specs import build_graders
from trialkit.loaders.suite_file.models import (
    AgentHarness,
    CommandHarness,
    DatasetSpec,
    ModelHarness,
    PythonEnvironment,
    PythonHarness,
    SuiteFile,
    TaskFile,
    WorkspaceEnvironment,
)
from trialkit.loaders.suite_file.sandboxes import put_in_sandbox
from trialkit.task import Suite, SuiteError, Task, TaskInput, Turns


def build_suite(
    model: SuiteFile, base_dir: Path, *, source: str | None = None, locate: Locator | None = None
) -> Suite:
    """The runtime `Suite` of a file model; raises `SuiteFileError` listing every problem.

    Python references and data files are found relative to `base_dir`. Problems name
    `source` (default: `base_dir`) and the field, unless `locate` knows the file and line.
    """
    where = source if source is not None else str(base_dir)
    ctx = BuildContext(References(base_dir), locate or (lambda path: (where, None, path)))
    suite = build_into(ctx, model, base_dir)
    if suite is None:
        raise SuiteFileError(ctx.problems)
    return suite


def build_into(
    ctx: BuildContext,
    model: SuiteFile,
    base_dir: Path,
    *,
    complete: bool = True,
    taken: dict[str, str] | None = None,
) -> Suite | None:
    """Build `model`, recording problems in `ctx`; `None` if there are any.

    `complete` is false when some declared tasks were already refused, so an empty result is
    not a problem of its own; `taken` maps the ids of those tasks to where they are.
    """
    harness = _harness(ctx, model, base_dir)
    sandbox = put_in_sandbox(ctx, model.sandbox, base_dir, harness)
    environment = _environment(ctx, model, base_dir)
    suite_graders = build_graders(ctx, ("graders",), model.graders)
    _check_model(ctx, ("model",), model.model)
    tasks = _Tasks(taken or {})
    for i, spec in enumerate(model.tasks):
        tasks.add(ctx, ("tasks", i), _task(ctx, ("tasks", i), spec, model))
    for k, block in enumerate(model.dataset):
        _expand(ctx, tasks, ("dataset", k), block, model, base_dir)
    if complete and not model.tasks and not model.dataset:
        ctx.problem((), "the suite has no tasks: add `tasks:`, files in tasks/, or a `dataset:`")
    if ctx.problems:
        return None
    try:
        return Suite(
            id=model.id,
            tasks=tasks.tasks,
            kind=model.kind,
            trials=model.trials,
            harness=harness,
            graders=suite_graders or [],
            model=model.model,
            system=model.system,
            config=model.config,
            environment=environment,
            timeout=model.timeout,
            description=model.description,
            metadata=dict(model.metadata),
            sandbox=sandbox,
        )
    except SuiteError as exc:
        ctx.problem((), str(exc))
        return None


class _Tasks:
    """The suite's tasks so far, refusing a second task with the same id."""

    def __init__(self, taken: dict[str, str]) -> None:
        self.tasks: list[Task] = []
        self.first = dict(taken)

    def add(self, ctx: BuildContext, path: FieldPath, task: Task | None) -> None:
        if task is None:
            return
        file, line, _ = ctx.locate(path)
        here = file if line is None else f"{file}:{line}"
        if task.id in self.first:
            ctx.problem(
                (*path, "id"), f"duplicate task id {task.id!r} (first in {self.first[task.id]})"
            )
            return
        self.first[task.id] = here
        task.source = (file, line or 1)
        self.tasks.append(task)


def _task(ctx: BuildContext, path: FieldPath, spec: TaskFile, suite: SuiteFile) -> Task | None:
    """The runtime task of `spec`, with `path` the task's place for `ctx`'s locator."""
    graders = build_graders(ctx, (*path, "graders"), spec.graders)
    _check_model(ctx, (*path, "model"), spec.model)
    if suite.kind == "mixed" and spec.kind is None:
        ctx.problem(
            (*path, "kind"), "a task in a mixed suite needs its own kind (capability or regression)"
        )
        return None
    if graders is None:
        return None
    task_input: TaskInput
    if spec.turns is not None:
        task_input = Turns(*(_plain(turn) for turn in spec.turns))
    else:
        assert spec.input is not None
        task_input = _plain(spec.input)
    try:
        return Task(
            id=spec.id,
            input=task_input,
            graders=list(graders),
            criteria=spec.criteria,
            reference=spec.reference,
            metadata=dict(spec.metadata),
            tags=list(dict.fromkeys([*suite.tags, *spec.tags])),
            expect=spec.expect,
            model_faults=spec.model_faults,
            trials=spec.trials,
            timeout=spec.timeout,
            model=spec.model,
            config=spec.config,
            response_format=spec.response_format,
            kind=spec.kind,
        )
    except SuiteError as exc:
        ctx.problem(path, str(exc))
        return None


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return value
    return [m.model_dump() for m in value]


def _check_model(ctx: BuildContext, path: FieldPath, model_id: str | None) -> None:
    if model_id is None:
        return
    from trialkit.models.registry import UnknownModel, check_model_id

    try:
        check_model_id(model_id)
    except UnknownModel as exc:
        ctx.problem(path, str(exc))


def _harness(ctx: BuildContext, model: SuiteFile, base_dir: Path) -> Any:
    spec = model.harness
    if isinstance(spec, PythonHarness):
        found = ctx.resolve(("harness", "python"), spec.python)
        if found is None:
            return None
        from trialkit.harness.function import as_harness

        try:
            as_harness(found)
        except TypeError:
            ctx.problem(
                ("harness", "python"),
                f"{spec.python} is {describe(found)}, not an agent "
                "(a function, an agent class with send(), or a trialkit Harness)",
            )
        return found
    if isinstance(spec, ModelHarness):
        _check_model(ctx, ("harness", "model"), spec.model)
        from trialkit.harness.chat import ChatHarness

        return ChatHarness(spec.model)
    if isinstance(spec, CommandHarness):
        return _command_harness(ctx, spec, base_dir)
    if isinstance(spec, AgentHarness):
        return _agent_harness(ctx, spec)
    return None


def _tools(ctx: BuildContext, refs: list[Any]) -> list[Any] | None:
    """The functions `tools:` names, or `None` when one could not be found (a problem)."""
    tools = []
    before = len(ctx.problems)
    for i, ref in enumerate(refs):
        found = ctx.resolve(("harness", "tools", i), ref)
        if found is not None and not callable(found):
            ctx.problem(("harness", "tools", i), f"{ref} is {describe(found)}, not a function")
        elif found is not None:
            tools.append(found)
    return None if len(ctx.problems) > before else tools


def _agent_harness(ctx: BuildContext, spec: AgentHarness) -> Any:
    from trialkit.harness.subprocess import SubprocessAgent

    tools = _tools(ctx, spec.tools)
    if tools is None:
        return None
    options: dict[str, Any] = {
        "model": spec.model,
        "args": spec.args,
        "upstream": spec.upstream,
        "env": spec.env,
        "timeout": spec.timeout,
        "tools": tools,
    }
    if spec.executable is not None:
        options["executable"] = spec.executable
    try:
        if spec.agent == "codex":
            if spec.sandbox is not None:
                options["sandbox"] = spec.sandbox
            return SubprocessAgent.codex(**options)
        if spec.permission_mode is not None:
            options["permission_mode"] = spec.permission_mode
        return SubprocessAgent.claude_code(allowed_tools=spec.allowed_tools, **options)
    except (TypeError, ValueError) as exc:
        ctx.problem(("harness", "agent"), str(exc))
        return None


def _command_harness(ctx: BuildContext, spec: CommandHarness, base_dir: Path) -> Any:
    from trialkit.harness.subprocess import SubprocessAgent

    tools = _tools(ctx, spec.tools)
    if tools is None:
        return None
    folder = str(base_dir.resolve())
    try:
        return SubprocessAgent(
            [arg.replace("{suite_dir}", folder) for arg in spec.command],
            env=spec.env,
            timeout=spec.timeout,
            tools=tools,
            output=spec.output,
            stdin=spec.stdin,
            continue_args=spec.continue_args,
        )
    except (TypeError, ValueError) as exc:
        ctx.problem(("harness", "command"), str(exc))
        return None


def _environment(ctx: BuildContext, model: SuiteFile, base_dir: Path) -> Environment | None:
    spec = model.environment
    if isinstance(spec, WorkspaceEnvironment):
        path = ("environment", "workspace")
        fixture = base_dir / spec.workspace
        if not fixture.is_dir():
            ctx.problem(path, f"no such folder: {fixture}")
            return None
        from trialkit.environments.workspace import Workspace

        return Workspace(fixture)
    if not isinstance(spec, PythonEnvironment):
        return None
    path = ("environment", "python")
    found = ctx.resolve(path, spec.python)
    if found is None:
        return None
    made = found
    if not isinstance(found, Environment) and callable(found):
        try:
            made = found()
        except Exception as exc:
            ctx.problem(path, f"{spec.python}: calling it raised {type(exc).__name__}: {exc}")
            return None
    if not isinstance(made, Environment):
        ctx.problem(path, f"{spec.python} gives {describe(made)}, not a trialkit Environment")
        return None
    return made


_TEXT_FIELDS = ("id", "input", "criteria", "reference")


def _expand(
    ctx: BuildContext,
    tasks: _Tasks,
    path: FieldPath,
    block: DatasetSpec,
    suite: SuiteFile,
    base_dir: Path,
) -> None:
    """Add a task per row of the block's data file, each checked like a task file."""
    data_path = base_dir / block.path
    shown = str(data_path)
    if not data_path.is_file():
        ctx.problem((*path, "path"), f"no such file: {shown}")
        return
    rows, problems = read_rows(data_path, shown)
    ctx.problems.extend(problems)
    if not rows and not problems:
        ctx.problem((*path, "path"), f"{shown} has no rows")
    prefix = ctx.locate(path)[2]
    template = block.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, exclude={"path", "id"}
    )
    if "input" not in template and "turns" not in template:
        template["input"] = "{{input}}"
    stem = Path(block.path).stem
    for row in rows:
        row_ctx = ctx.elsewhere(_row_locator(shown, row, prefix))
        spec = _row_task(row_ctx, row, block, template, f"{stem}-{row.number}")
        if spec is not None:
            tasks.add(row_ctx, (), _task(row_ctx, (), spec, suite))


def _row_locator(file: str, row: Row, prefix: FieldPath) -> Locator:
    return lambda path: (file, row.line, (*prefix, *path))


def _row_task(
    ctx: BuildContext, row: Row, block: DatasetSpec, template: dict[str, Any], default_id: str
) -> TaskFile | None:
    missing: list[tuple[FieldPath, str]] = []
    raw = fill(template, row.values, (), missing)
    raw["id"] = fill(block.id, row.values, ("id",), missing) if block.id else default_id
    if missing:
        fields = ", ".join(str(k) for k in row.values) or "none"
        for where, name in missing:
            ctx.problem(where, f"no field {name!r} in row {row.number} (its fields: {fields})")
        return None
    for key in _TEXT_FIELDS:
        value = raw.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            raw[key] = str(value)
    try:
        return TaskFile.model_validate(raw)
    except ValidationError as exc:
        for loc, message in explain(exc):
            ctx.problem(user_path(loc, raw), message)
        return None
