"""Tasks and suites: what to evaluate. Definitions hold user callables, so they are dataclasses."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from trialkit.transcript import Message

if TYPE_CHECKING:
    from trialkit.environments.base import Environment
    from trialkit.graders.base import GraderLike
    from trialkit.harness.base import HarnessLike
    from trialkit.loaders.target import SuiteSource
    from trialkit.models.base import GenerationConfig, Model, ResponseFormat
    from trialkit.sandbox.base import SandboxPolicy, SandboxProvider

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_TRIALS = 1
MAX_TRIALS = 10_000
"""The most trials a task may get: more is a typo, and would exhaust memory planning them."""
MAX_TIMEOUT_S = 86_400.0
"""The longest a trial may take (a day); `timeout` is a number of seconds in (0, MAX]."""
MAX_ID_CHARS = 200
"""The longest a suite or task id may be (ids name runs, files and report lines)."""

Expect = Literal["success", "failure"]
ModelFaults = Literal["error", "allow"]
"""What a model call that got no usable answer does to a trial (see `Task.model_faults`)."""


class SuiteKind(StrEnum):
    """How a task's trials decide the task's verdict.

    In a `capability` suite a task passes if at least one trial passed (can the agent do it at
    all?); in a `regression` suite only if every trial passed (does it still always work?). A
    `mixed` suite takes each task's own `kind`.
    """

    CAPABILITY = "capability"
    REGRESSION = "regression"
    MIXED = "mixed"


KindName = Literal["capability", "regression", "mixed"]
"""A kind may be given by name: `Suite(kind="regression")`."""


class SuiteError(ValueError):
    """A suite or task definition is invalid; the message names the suite, task and field."""


@dataclass(frozen=True)
class Turns:
    """Several user turns, sent one after the other to the same session."""

    turns: tuple[str | tuple[Message, ...], ...]

    def __init__(self, *turns: str | Sequence[Message | Mapping[str, Any]]) -> None:
        normalized = tuple(t if isinstance(t, str) else tuple(_messages(t)) for t in turns)
        object.__setattr__(self, "turns", normalized)

    def __len__(self) -> int:
        return len(self.turns)


TaskInput: TypeAlias = str | list[Message] | Turns
"""A task's input: a string, chat messages (possibly with a system message), or `Turns`."""


def _messages(items: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in items]


def normalize_input(value: object) -> TaskInput:
    """Accept a string, `Turns`, or a sequence of `Message`s / message dicts."""
    if isinstance(value, str | Turns):
        return value
    if isinstance(value, Sequence) and all(isinstance(m, Message | Mapping) for m in value):
        messages = _messages(value)
        if not messages:
            raise ValueError("input: an empty list of messages")
        return messages
    raise TypeError(
        f"input: expected a string, a list of chat messages or Turns, got {type(value).__name__}"
    )


@dataclass
class Task:
    """One thing to evaluate: an input, graders, and how many trials and how long."""

    id: str
    input: TaskInput | Sequence[Mapping[str, Any]]
    """A string, chat messages (`Message`s or dicts), or `Turns`; stored normalised."""
    graders: list[GraderLike] = field(default_factory=list)
    """Checks of this task, applied after the suite's graders."""
    criteria: str | None = None
    """Success criteria in prose, for humans and judges."""
    reference: str | None = None
    """An optional reference solution (a known-good answer)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    expect: Expect = "success"
    """`failure` for tasks the agent must refuse or fail at; see the user guide."""
    trials: int | None = None
    """Overrides the suite's trial count."""
    timeout: float | None = None
    """Seconds for setup, agent and grading of one trial; overrides the suite's (60 s)."""
    model: str | Model | None = None
    """Overrides the suite's model."""
    config: GenerationConfig | None = None
    """Overrides the suite's generation parameters for a model harness."""
    response_format: ResponseFormat | None = None
    """Asks a model harness for JSON output (optionally matching a JSON Schema)."""
    kind: SuiteKind | KindName | None = None
    """For a task in a `mixed` suite: `capability` or `regression`."""
    probes: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    """Queries of the world run after each user turn (sync or async, given the environment's
    world); each answer is recorded in that turn of the transcript (`Turn.probes`), so a
    grader can tell *when* something became true (`graders.probe`). Added to the suite's."""
    model_faults: ModelFaults = "error"
    """`error`: a model call of the agent's that got no usable answer (an error status, even
    after the SDK's retries; a body or stream that is broken, cut short or not the API's)
    makes the trial an error, whatever the agent did then. `allow`: such calls are only
    recorded (with their problem) and the graders decide, for agents whose job is to survive
    provider faults."""
    source: tuple[str, int] | None = field(default=None, compare=False, repr=False)
    """Where the task is defined: `(file, line)`. A suite file's loader sets the task's place
    in the file (a dataset row's line for a generated task); a `Task` built in Python records
    the line of the code that built it. Reports, annotations and JUnit point there."""

    def __post_init__(self) -> None:
        where = f"task {self.id!r}"
        if self.source is None:
            self.source = _caller_location()
        elif not _is_location(self.source):
            raise SuiteError(f"{where}: source: expected (file, line >= 1), got {self.source!r}")
        else:
            self.source = (os.fspath(self.source[0]), int(self.source[1]))
        if (problem := id_problem(self.id)) is not None:
            raise SuiteError(f"{_named('task', self.id)}: id: {problem}")
        try:
            self.input = normalize_input(self.input)
        except (TypeError, ValueError) as exc:
            raise SuiteError(f"{where}: {exc}") from None
        if self.expect not in ("success", "failure"):
            raise SuiteError(
                f"{where}: expect: must be 'success' or 'failure', got {self.expect!r}"
            )
        if self.model_faults not in ("error", "allow"):
            raise SuiteError(
                f"{where}: model_faults: must be 'error' or 'allow', got {self.model_faults!r}"
            )
        if self.trials is not None and (problem := trials_problem(self.trials)) is not None:
            raise SuiteError(f"{where}: trials: {problem}")
        if self.timeout is not None and (problem := timeout_problem(self.timeout)) is not None:
            raise SuiteError(f"{where}: timeout: {problem}")
        if self.kind is not None:
            try:
                self.kind = SuiteKind(self.kind)
            except ValueError:
                raise SuiteError(
                    f"{where}: kind: must be 'capability' or 'regression', got {self.kind!r}"
                ) from None
            if self.kind is SuiteKind.MIXED:
                raise SuiteError(f"{where}: kind: a task is 'capability' or 'regression'")
        self.graders = list(self.graders)
        self.tags = list(self.tags)
        self.probes = _check_probes(self.probes, where)

    @property
    def turns(self) -> list[str | list[Message]]:
        """The user turns of this task: one for a string or messages, several for `Turns`."""
        value = normalize_input(self.input)
        if isinstance(value, Turns):
            return [t if isinstance(t, str) else list(t) for t in value.turns]
        return [value]

    @property
    def prompt(self) -> str:
        """The input as plain text (the last user message, or the first turn)."""
        first = self.turns[0]
        if isinstance(first, str):
            return first
        users = [m.content for m in first if m.role == "user"]
        return users[-1] if users else first[-1].content


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _caller_location() -> tuple[str, int] | None:
    """The file and line of the first frame outside trialkit (and outside generated code such
    as a dataclass's `__init__`): the user code that built the task."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if _is_users(name):
            return name, frame.f_lineno
        frame = frame.f_back
    return None


@functools.lru_cache(maxsize=1024)
def _is_users(filename: str) -> bool:
    """Whether code of `filename` is the user's: a suite file building 10,000 tasks asks 10,000
    times of the same few files."""
    return not filename.startswith("<") and not os.path.abspath(filename).startswith(_PACKAGE_DIR)


def _is_location(value: object) -> bool:
    return (
        isinstance(value, tuple | list)
        and len(value) == 2
        and isinstance(value[0], str | os.PathLike)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
        and value[1] >= 1
    )


_ID_FORBIDDEN = re.compile(r"[/#\x00-\x1f\x7f-\x9f]")
"""`/` and `#` separate a run, a task and a trial (`RUN/TASK#N`); control characters (C0,
DEL and C1) would garble the terminal, files and reports that show ids."""


def id_problem(value: object) -> str | None:
    """What is wrong with `value` as a suite or task id, or `None` when it is a good one."""
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty string"
    if _ID_FORBIDDEN.search(value):
        return "must not contain '/', '#' or control characters"
    if len(value) > MAX_ID_CHARS:
        return f"must be at most {MAX_ID_CHARS} characters, got {len(value)}"
    return None


def _named(what: str, value: object) -> str:
    return f"{what} {value!r}" if isinstance(value, str) and value.strip() else what


def trials_problem(value: object) -> str | None:
    """What is wrong with `value` as a trial count (a whole number in 1..MAX_TRIALS)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_TRIALS:
        return f"must be a whole number from 1 to {MAX_TRIALS:,}, got {value!r}"
    return None


def timeout_problem(value: object) -> str | None:
    """What is wrong with `value` as a timeout (seconds, a number in (0, MAX_TIMEOUT_S])."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not 0 < value <= MAX_TIMEOUT_S
    ):
        return f"must be a number of seconds > 0 and <= {MAX_TIMEOUT_S:,.0f}, got {value!r}"
    return None


def _check_probes(probes: object, where: str) -> dict[str, Callable[[Any], Any]]:
    if not isinstance(probes, Mapping):
        raise SuiteError(f"{where}: probes: expected a mapping of names to callables")
    for name, query in probes.items():
        if not isinstance(name, str) or not name:
            raise SuiteError(f"{where}: probes: names must be non-empty strings, got {name!r}")
        if not callable(query):
            raise SuiteError(
                f"{where}: probes: {name}: expected a callable, got {type(query).__name__}"
            )
    return dict(probes)


@dataclass
class Suite:
    """A set of tasks with a kind, a default trial count, default graders and a harness."""

    id: str
    tasks: list[Task]
    kind: SuiteKind | KindName = SuiteKind.CAPABILITY
    trials: int = DEFAULT_TRIALS
    """How many trials each task gets unless it says otherwise."""
    harness: HarnessLike | None = None
    """The agent under test: a callable, a `Harness`, or a model id string."""
    graders: list[GraderLike] = field(default_factory=list)
    """Checks applied to every task, before the task's own."""
    model: str | Model | None = None
    """The model under test when no harness is given (and the default for judges)."""
    system: str | None = None
    """A system prompt for a model harness."""
    config: GenerationConfig | None = None
    """Generation parameters for a model harness (temperature, max_tokens, ...)."""
    environment: Environment | None = None
    """Prepares and captures the world for each trial; none by default."""
    timeout: float = DEFAULT_TIMEOUT_S
    description: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    probes: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    """Queries of the world run after each user turn of every task (see `Task.probes`)."""
    sandbox: SandboxPolicy | str | None = None
    """Where each trial's processes run: a sandbox provider's name (its default policy) or a
    `SandboxPolicy` (whose `options` make the provider), refused here when the provider is
    missing or cannot enforce it. Python harnesses and graders reach it as `ctx.sandbox`; a
    command-line agent with a sandbox of its own (`in_sandbox`) runs in that one."""
    chosen_sandbox: tuple[SandboxProvider, SandboxPolicy] | None = field(
        default=None, init=False, compare=False, repr=False
    )
    """The provider made for `sandbox`, and its policy."""
    source: SuiteSource | None = field(default=None, compare=False, repr=False)
    """Where the suite was loaded from (set by `load_target`), so worker processes can load
    it again themselves: a suite holds functions, which are never sent between processes."""

    def __post_init__(self) -> None:
        if (problem := id_problem(self.id)) is not None:
            shown = (
                f"suite {self.id!r}" if isinstance(self.id, str) and self.id.strip() else "suite"
            )
            raise SuiteError(f"{shown}: id: {problem}")
        where = f"suite {self.id!r}"
        self.probes = _check_probes(self.probes, where)
        try:
            self.kind = SuiteKind(self.kind)
        except ValueError:
            raise SuiteError(
                f"{where}: kind: must be 'capability', 'regression' or 'mixed', got {self.kind!r}"
            ) from None
        if (problem := trials_problem(self.trials)) is not None:
            raise SuiteError(f"{where}: trials: {problem}")
        if (problem := timeout_problem(self.timeout)) is not None:
            raise SuiteError(f"{where}: timeout: {problem}")
        self.tasks = list(self.tasks)
        seen: set[str] = set()
        for task in self.tasks:
            if not isinstance(task, Task):
                raise SuiteError(
                    f"{where}: tasks: expected Task objects, got {type(task).__name__}"
                )
            if task.id in seen:
                raise SuiteError(f"{where}: tasks: duplicate task id {task.id!r}")
            seen.add(task.id)
            if self.kind is SuiteKind.MIXED and task.kind is None:
                raise SuiteError(
                    f"{where}: task {task.id!r}: kind: a task in a mixed suite needs its own "
                    "kind ('capability' or 'regression')"
                )
        self.graders = list(self.graders)
        if self.sandbox is not None:
            from trialkit.sandbox.trial import choose_sandbox

            try:
                self.chosen_sandbox = choose_sandbox(self.sandbox)
            except ValueError as exc:
                raise SuiteError(f"{where}: sandbox: {exc}") from None

    def probes_for(self, task: Task) -> dict[str, Callable[[Any], Any]]:
        """The suite's probes and the task's (the task's win on a shared name)."""
        return {**self.probes, **task.probes} if self.probes else task.probes

    def task_kind(self, task: Task) -> SuiteKind:
        """The kind that decides this task's verdict."""
        if self.kind is SuiteKind.MIXED:
            assert task.kind is not None
            return SuiteKind(task.kind)
        return SuiteKind(self.kind)

    def trials_for(self, task: Task, override: int | None = None) -> int:
        """How many trials `task` gets: the override (`--trials`), the task's, or the suite's."""
        if override is not None:
            return override
        return task.trials if task.trials is not None else self.trials

    def timeout_for(self, task: Task, override: float | None = None) -> float:
        if override is not None:
            return override
        return task.timeout if task.timeout is not None else self.timeout

    def select(self, *, task_ids: Sequence[str] = (), tags: Sequence[str] = ()) -> list[Task]:
        """The tasks matching any of `task_ids` (exact or glob) and any of `tags`."""
        from fnmatch import fnmatchcase

        chosen = self.tasks
        if task_ids:
            chosen = [t for t in chosen if any(t.id == p or fnmatchcase(t.id, p) for p in task_ids)]
        if tags:
            chosen = [t for t in chosen if set(t.tags) & set(tags)]
        return chosen
