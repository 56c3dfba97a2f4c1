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
    one_key_check,
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
    model_faults: Literal["error", "allow"] = "error"
    """`error`: a model call of the agent's that got no usable answer (an error status after
    the SDK's retries, a broken or cut body or stream) makes the trial an error, whatever the
    agent did then. `allow`: such calls are only recorded, and the graders decide (for agents
    whose job is to survive provider faults)."""
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


class AgentHarness(FileModel):
    """A command-line agent people use, set up by trialkit (`SubprocessAgent.claude_code()` or
    `.codex()`): its model calls go through trialkit's model proxy, so they are recorded and
    can be replayed."""

    agent: Literal["claude-code", "codex"]
    """Which agent: `claude-code` (the `claude` command) or `codex`."""
    model: str | None = None
    """The model the agent uses (its own default when left out)."""
    allowed_tools: list[str] | None = None
    """Claude Code: its `--allowed-tools`."""
    permission_mode: (
        Literal["acceptEdits", "bypassPermissions", "default", "dontAsk", "plan"] | None
    ) = None
    """Claude Code: its `--permission-mode` (acceptEdits by default: it may edit the
    workspace)."""
    sandbox: Literal["read-only", "workspace-write", "danger-full-access"] | None = None
    """Codex: its `-s` sandbox policy (workspace-write by default)."""
    args: list[str] = Field(default_factory=list)
    """More arguments for the agent."""
    executable: str | None = None
    """The program to run, when it is not `claude` / `codex` on PATH."""
    upstream: str | None = None
    """Where the proxy sends the agent's calls on (by default ANTHROPIC_BASE_URL /
    OPENAI_BASE_URL from trialkit's environment, else the provider's host)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables for the agent (added to what trialkit sets)."""
    timeout: Seconds | None = None
    """Seconds one turn may take."""
    tools: list[PythonRef] = Field(default_factory=list)
    """Python functions served to the agent over MCP (module:function references)."""

    @model_validator(mode="after")
    def _options_of_the_agent(self) -> AgentHarness:
        if self.agent == "codex":
            for option in ("allowed_tools", "permission_mode"):
                if getattr(self, option) is not None:
                    raise problem(f"`{option}` is a Claude Code option; codex has no such thing")
        elif self.sandbox is not None:
            raise problem("`sandbox` is a Codex option; Claude Code takes `permission_mode`")
        return self


class ModelHarness(FileModel):
    """The agent under test is a model answering the task (a chat harness)."""

    model: str
    """provider/name, e.g. openai/gpt-4o-mini."""


_HARNESSES = (
    ("python", PythonHarness),
    ("command", CommandHarness),
    ("agent", AgentHarness),
    ("model", ModelHarness),
)
_ENV_KEYS = ("workspace", "python")
_HARNESS_KEYS = tuple(n for n, _ in _HARNESSES)
_any_harness = key_among(_HARNESS_KEYS)
_one_harness = one_key_check("harness", _HARNESS_KEYS, only=False)


def _harness_kind(value: Any) -> str | None:
    """`agent` wins: its `model:` is the agent's model, not a model harness."""
    return "agent" if isinstance(value, dict) and "agent" in value else _any_harness(value)


def _check_harness(value: Any) -> Any:
    if isinstance(value, dict) and "agent" in value:
        return value
    return _one_harness(value)


class WorkspaceEnvironment(FileModel):
    """A fresh copy of a fixture folder per trial, with its diff captured (a `Workspace`)."""

    workspace: str
    """The fixture folder, relative to the suite's folder (e.g. fixtures/repo)."""


class PythonEnvironment(FileModel):
    """An `Environment` object (or a class or function making one), by import path."""

    python: PythonRef


if TYPE_CHECKING:
    HarnessSpec = PythonHarness | CommandHarness | AgentHarness | ModelHarness
    EnvironmentSpec = WorkspaceEnvironment | PythonEnvironment
else:
    HarnessSpec = Annotated[
        one_key(_harness_kind, *_HARNESSES),
        BeforeValidator(_check_harness),
    ]
    EnvironmentSpec = Annotated[
        one_key(
            key_among(_ENV_KEYS),
            ("workspace", WorkspaceEnvironment),
            ("python", PythonEnvironment),
        ),
        check_one_key("environment", _ENV_KEYS),
    ]


_NETWORK = Literal["none", "model-only", "allowlist", "host"]


class SandboxLimits(FileModel):
    """Bounds on what one trial's sandbox may use (a limit hit is a trial error naming it)."""

    memory_bytes: Annotated[int, Field(gt=0, strict=True)] | None = None
    """Memory of all the sandbox's processes together."""
    processes: Annotated[int, Field(gt=0, strict=True)] | None = None
    """Processes alive at once."""
    cpu_seconds: Annotated[float, Field(gt=0, strict=True)] | None = None
    """CPU time of one process."""
    wall_clock_seconds: Annotated[float, Field(gt=0, strict=True)] | None = None
    """Wall-clock time of one command (the trial's timeout bounds the whole)."""
    output_bytes: Annotated[int, Field(gt=0, strict=True)] | None = None
    """Output kept per command of a grader (an agent's stdout is kept up to 10 MB)."""
    disk_bytes: Annotated[int, Field(gt=0, strict=True)] | None = None
    """Bytes the workspace, HOME and /tmp may hold together."""


class SandboxSpec(FileModel):
    """Where the agent's processes run, and what they can reach (docs/sandbox.md)."""

    provider: str
    """`bwrap`, `docker`, `podman`, `local`, or a provider another package adds."""
    network: _NETWORK | None = None
    """While the agent runs (default: the provider's, `model-only` for bwrap as root)."""
    grader_network: _NETWORK | None = None
    """While graders run commands in the sandbox (default `none`)."""
    allow: list[str] = Field(default_factory=list)
    """Destinations an `allowlist` network reaches besides trialkit's endpoints: `host:port`
    or a URL (its host and port); an entry without a port is refused."""
    limits: SandboxLimits | None = None
    image: str | None = None
    """The image to run in (docker, podman)."""
    dockerfile: str | None = None
    """A Dockerfile, relative to the suite's folder, built once per suite (docker, podman)."""
    user: str | None = None
    """The user the agent runs as (a uid, uid:gid or root)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables every process of the sandbox gets."""
    options: dict[str, JsonValue] = Field(default_factory=dict)
    """Settings of the provider itself (bwrap: read_only, read_write: host paths bound in)."""


def _provider_named(value: Any) -> Any:
    """`sandbox: bwrap` is `sandbox: {provider: bwrap}`."""
    if isinstance(value, str):
        return {"provider": value}
    if not isinstance(value, dict):
        raise problem("expected a provider's name (bwrap) or a mapping {provider: ..., ...}")
    return value


class _NameOrSpec:
    """JSON Schema of a sandbox: a provider's name, or the mapping."""

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "string"}, handler(schema)]}


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
    sandbox: Annotated[SandboxSpec, BeforeValidator(_provider_named), _NameOrSpec()] | None = None
    """Where each trial's processes run (a command-line agent's turns; `ctx.sandbox` of a
    Python agent and of the graders): a provider's name (`bwrap`), or
    `{provider: ..., network: ..., limits: {...}}`; refused before any trial when the provider
    is not installed or cannot enforce it."""
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
