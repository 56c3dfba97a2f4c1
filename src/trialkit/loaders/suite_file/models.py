"""The file models: what `suite.yaml` and `tasks/*.yaml` may hold (DESIGN §5).

They are validated strictly (an unknown field is an error) and are the source of the published
JSON Schema. Importers of other formats produce a `SuiteFile` too; `build_suite` turns one into
a runtime `Suite`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, GetJsonSchemaHandler, JsonValue, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from trialkit.loaders.suite_file.fields import (
    FileModel,
    PythonRef,
    Seconds,
    SuiteId,
    TaskId,
    Text,
    Trials,
    check_one_key,
    key_among,
    one_key,
    problem,
)
from trialkit.loaders.suite_file.grader_specs import GraderSpec
from trialkit.models.base import GenerationConfig, ResponseFormat


class ChatMessage(FileModel):
    """One chat message of a task's input."""

    role: Literal["system", "user", "assistant"]
    content: str


Messages = Annotated[list[ChatMessage], Field(min_length=1)]


def _input_kind(value: Any) -> str | None:
    return "text" if isinstance(value, str) else "messages" if isinstance(value, list) else None


if TYPE_CHECKING:
    Input = str | list[ChatMessage]
else:
    Input = one_key(
        _input_kind,
        ("text", str),
        ("messages", Messages),
        error="expected a string or a list of chat messages ({role, content})",
    )


class TaskHead(FileModel):
    schema_: str | None = Field(default=None, alias="$schema")
    """The JSON Schema of this file, for editors; ignored by trialkit."""
    id: TaskId
    """The task's id, unique in the suite."""
    input: Input | None = None
    """What the agent gets: a string, or chat messages (a system message included)."""
    turns: Annotated[list[Input], Field(min_length=1)] | None = None
    """Several user turns, sent one after the other to the same session (instead of `input`)."""


class TaskFields(FileModel):
    """What a task (or a dataset block, for each of its rows) may set besides its input."""

    criteria: str | None = None
    """Success criteria in prose, for humans and judges."""
    reference: Text | None = None
    """A reference solution (a known-good answer)."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free data for graders and reports."""
    tags: list[str] = Field(default_factory=list)
    """For selecting tasks with `trialkit run --tag`."""
    expect: Literal["success", "failure"] = "success"
    """`failure` for tasks the agent must refuse or fail at."""
    trials: Trials | None = None
    """Overrides the suite's trial count."""
    timeout: Seconds | None = None
    """Seconds for one trial; overrides the suite's."""
    model: str | None = None
    """Overrides the suite's model (provider/name)."""
    kind: Literal["capability", "regression"] | None = None
    """In a `mixed` suite, how this task's trials decide its verdict."""
    config: GenerationConfig | None = None
    """Generation parameters for a model harness (temperature, max_tokens, top_p, stop, seed)."""
    response_format: ResponseFormat | None = None
    """Ask a model harness for JSON output, optionally matching a JSON Schema."""
    graders: list[GraderSpec] = Field(default_factory=list)
    """This task's checks, applied after the suite's graders."""


class TaskFile(TaskFields, TaskHead):
    """One task: an inline entry of `tasks:` in a suite file, or a file in `tasks/`."""

    @model_validator(mode="after")
    def _one_input(self) -> TaskFile:
        if (self.input is None) == (self.turns is None):
            raise problem("give the task either `input` or `turns`")
        return self


class DatasetHead(FileModel):
    path: str
    """The data file, relative to the suite's folder: `.jsonl`, `.csv` or `.json` (a list of
    objects)."""
    id: str | None = None
    """A template for each task's id; by default `<file stem>-<row number>`."""
    input: Input | None = None
    """A template for each task's input; by default `{{input}}`, the row's `input` as it is."""
    turns: Annotated[list[Input], Field(min_length=1)] | None = None
    """Templates of several user turns (instead of `input`)."""


class DatasetSpec(TaskFields, DatasetHead):
    """Tasks generated from a data file: one per row, `{{field}}` filled in from the row.

    Templates work in every string of the block but `path`. A string that is exactly one
    `{{field}}` takes the value as it is (a list of chat messages stays a list).
    """

    @model_validator(mode="after")
    def _one_input(self) -> DatasetSpec:
        if self.input is not None and self.turns is not None:
            raise problem("give the dataset either `input` or `turns`, not both")
        return self


class PythonHarness(FileModel):
    """The agent under test is Python code: a function, an agent class or a `Harness`."""

    python: PythonRef


class CommandHarness(FileModel):
    """A command-line agent run in the workspace once per user turn (a `SubprocessAgent`)."""

    command: Annotated[list[str], Field(min_length=1)]
    """The program and its arguments. `{input}` is replaced by the turn's message (otherwise it
    is the last argument), `{workspace}`, `{mcp_url}` and `{mcp_config}` as in Python, and
    `{suite_dir}` by this suite's folder (for scripts kept next to suite.yaml)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the program (added to trialkit's own)."""
    timeout: Seconds | None = None
    """Seconds one turn may take; the agent's whole process group is stopped after that."""
    output: Literal["auto", "json", "stream-json", "text"] = "auto"
    """How to read what the agent prints."""
    stdin: bool = False
    """Send the turn's message on standard input instead of as an argument."""
    continue_args: list[str] = Field(default_factory=list)
    """Arguments added on later turns, e.g. [--resume, "{session_id}"]."""
    tools: list[PythonRef] = Field(default_factory=list)
    """Python functions served to the agent over MCP (module:function references)."""


class ModelHarness(FileModel):
    """The agent under test is a model answering the task (a chat harness)."""

    model: str
    """provider/name, e.g. openai/gpt-4o-mini."""


_HARNESSES = (("python", PythonHarness), ("command", CommandHarness), ("model", ModelHarness))
_ENV_KEYS = ("workspace", "python")


class WorkspaceEnvironment(FileModel):
    """A fresh copy of a fixture folder per trial, with its diff captured (a `Workspace`)."""

    workspace: str
    """The fixture folder, relative to the suite's folder (e.g. fixtures/repo)."""


class PythonEnvironment(FileModel):
    """An `Environment` object (or a class or function making one), by import path."""

    python: PythonRef


if TYPE_CHECKING:
    HarnessSpec = PythonHarness | CommandHarness | ModelHarness
    EnvironmentSpec = WorkspaceEnvironment | PythonEnvironment
else:
    HarnessSpec = Annotated[
        one_key(key_among(tuple(n for n, _ in _HARNESSES)), *_HARNESSES),
        check_one_key("harness", tuple(n for n, _ in _HARNESSES), only=False),
    ]
    EnvironmentSpec = Annotated[
        one_key(
            key_among(_ENV_KEYS),
            ("workspace", WorkspaceEnvironment),
            ("python", PythonEnvironment),
        ),
        check_one_key("environment", _ENV_KEYS),
    ]


class _OneOrList:
    """JSON Schema of a list that may also be written as its one item."""

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        full = handler(schema)
        return {"anyOf": [full["items"], full]}


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, dict) else value


class SuiteFile(FileModel):
    """A suite: `suite.yaml` (or `.json`), with inline tasks, a `tasks/` folder, datasets."""

    schema_: str | None = Field(default=None, alias="$schema")
    """The JSON Schema of this file, for editors; ignored by trialkit."""
    id: SuiteId
    """The suite's id (runs and reports are filed under it)."""
    description: str | None = None
    kind: Literal["capability", "regression", "mixed"] = "capability"
    """`capability`: a task passes if any trial passes; `regression`: only if every trial
    passes; `mixed`: each task says with its own `kind`."""
    trials: Trials = 1
    """Trials per task unless a task says otherwise."""
    timeout: Seconds = 60.0
    """Seconds for one trial (setup, agent and grading) unless a task says otherwise."""
    model: str | None = None
    """The model under test (provider/name): the agent when no `harness` is given."""
    system: str | None = None
    """A system prompt for a model harness."""
    config: GenerationConfig | None = None
    """Generation parameters for a model harness (temperature, max_tokens, top_p, stop, seed)."""
    harness: HarnessSpec | None = None
    """The agent under test when it is not `model`: `{python: module:name}`, or a command."""
    environment: EnvironmentSpec | None = None
    """Prepares the world of each trial: `{workspace: fixtures/x}` or `{python: module:name}`."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    """Tags added to every task."""
    graders: list[GraderSpec] = Field(default_factory=list)
    """Checks applied to every task, before the task's own."""
    tasks: list[TaskFile] = Field(default_factory=list)
    """Inline tasks; more may come from files in `tasks/` and from `dataset`."""
    dataset: Annotated[list[DatasetSpec], BeforeValidator(_as_list), _OneOrList()] = Field(
        default_factory=list
    )
    """Tasks generated from data files: one block, or a list of blocks."""
