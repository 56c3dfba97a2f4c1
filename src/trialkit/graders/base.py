"""The grader protocol: a grader reads one `GradeContext` and returns a bool, a float or a `Score`.

Built-in graders are small dataclasses so suite files can name them; custom graders are plain
functions, optionally wrapped with `@grader` to set a name or a passing threshold.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeAlias, TypeVar, overload

from trialkit._calls import is_async, run_blocking
from trialkit._record import ErrorInfo
from trialkit.outcome import Outcome
from trialkit.score import Score, Verdict
from trialkit.transcript import Transcript
from trialkit.trial import TrialStatus

if TYPE_CHECKING:
    from trialkit.sandbox.base import Sandbox
    from trialkit.task import Task

GraderResult: TypeAlias = bool | float | Score
"""What a grader may return: a bool (pass/fail), a float in [0, 1], or a full `Score`."""

T = TypeVar("T")
P = ParamSpec("P")


@dataclass
class GradeContext:
    """Everything a grader may look at for one trial."""

    task: Task
    trial_index: int
    transcript: Transcript
    outcome: Outcome
    world: Any = None
    """What the environment's `setup` returned (e.g. a workspace); `None` without one."""
    sandbox: Sandbox | None = None
    """The trial's sandbox, the agent's own, in its grader phase (the policy's
    `grader_network`): `await ctx.sandbox.exec(["python", "-m", "pytest", "-q"])` runs the
    project's tests where the agent ran, on the files it left. `None` as for `TrialContext`."""
    _memo: dict[object, _MemoEntry] = field(default_factory=dict, repr=False)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def output(self) -> str:
        """The agent's final output as text (empty when it produced none)."""
        return self.outcome.output or ""

    @property
    def input(self) -> Any:
        return self.task.input

    @property
    def expected(self) -> str | None:
        """The task's reference answer, if it has one."""
        return self.task.reference

    @property
    def metadata(self) -> dict[str, Any]:
        return self.task.metadata

    def _entry(self, key: object) -> _MemoEntry:
        with self._memo_lock:
            entry = self._memo.get(key)
            if entry is None:
                entry = self._memo[key] = _MemoEntry()
            return entry


class _MemoEntry:
    __slots__ = ("done", "error", "lock", "value")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None


def shared(fn: Callable[[GradeContext], T]) -> Callable[[GradeContext], T]:
    """Memoise a computation per trial, so several graders can read it and pay once.

    ```python
    @shared
    def parsed(ctx: GradeContext) -> dict:
        return json.loads(ctx.output)
    ```

    Every grader that calls `parsed(ctx)` during one trial gets the same value (or the same
    exception). Graders running in worker threads wait for one computation instead of racing.
    """

    @functools.wraps(fn)
    def wrapper(ctx: GradeContext) -> T:
        entry = ctx._entry(fn)
        with entry.lock:
            if not entry.done:
                try:
                    entry.value = fn(ctx)
                except Exception as exc:
                    entry.error = exc
                entry.done = True
        if entry.error is not None:
            raise entry.error
        return entry.value  # type: ignore[no-any-return]

    return wrapper


class Grader:
    """Base of all graders. Subclasses implement `grade` (sync or async).

    A sync `grade` of a built-in grader runs on the event loop (they are quick); set
    `blocking = True` for a grader that may block, so it runs in a worker thread.
    """

    blocking: bool = False
    pass_at: float = 1.0
    """For graders that return a float: the value at or above which the check passes."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def grade(self, ctx: GradeContext) -> GraderResult | Awaitable[GraderResult]:
        raise NotImplementedError


GraderLike: TypeAlias = Grader | Callable[[GradeContext], Any]
"""A `Grader`, or any function from a `GradeContext` to a bool, float or `Score`."""


class FunctionGrader(Grader):
    """A grader made from a plain function, sync or async."""

    def __init__(
        self,
        fn: Callable[[GradeContext], Any],
        *,
        name: str | None = None,
        pass_at: float = 1.0,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a grader must be callable, got {type(fn).__name__}")
        self.fn = fn
        self._name: str = name or str(getattr(fn, "__name__", type(fn).__name__))
        self.pass_at = pass_at
        self.is_async = is_async(fn)
        self.blocking = not self.is_async
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return self._name

    def grade(self, ctx: GradeContext) -> Any:
        return self.fn(ctx)

    def __call__(self, ctx: GradeContext) -> Any:
        return self.fn(ctx)

    def __repr__(self) -> str:
        return f"grader({self._name})"


@overload
def grader(fn: Callable[[GradeContext], Any], /) -> FunctionGrader: ...


@overload
def grader(
    *, name: str | None = None, pass_at: float = 1.0
) -> Callable[[Callable[[GradeContext], Any]], FunctionGrader]: ...


def grader(
    fn: Callable[[GradeContext], Any] | None = None,
    /,
    *,
    name: str | None = None,
    pass_at: float = 1.0,
) -> FunctionGrader | Callable[[Callable[[GradeContext], Any]], FunctionGrader]:
    """Turn a function of a `GradeContext` into a grader.

    The function returns a bool, a float (clamped to [0, 1]; passes at `pass_at`, default 1.0)
    or a `Score`. Use it bare (`@grader`) or with options (`@grader(name=..., pass_at=0.8)`).
    """
    if not 0.0 <= pass_at <= 1.0:
        raise ValueError(f"pass_at must be within [0, 1], got {pass_at}")
    if fn is not None:
        return FunctionGrader(fn, name=name, pass_at=pass_at)

    def decorate(f: Callable[[GradeContext], Any]) -> FunctionGrader:
        return FunctionGrader(f, name=name, pass_at=pass_at)

    return decorate


def as_grader(obj: GraderLike) -> Grader:
    """A `Grader` for `obj`: graders pass through, callables are wrapped."""
    if isinstance(obj, Grader):
        return obj
    if callable(obj):
        return FunctionGrader(obj)
    raise TypeError(f"not a grader: {obj!r} (expected a Grader or a function of GradeContext)")


def to_score(result: object, *, name: str, pass_at: float = 1.0) -> Score:
    """Normalise what a grader returned into a `Score` named `name`."""
    if isinstance(result, Score):
        if not result.name:
            result.name = name
        return result
    if isinstance(result, bool):
        return Score.from_bool(result, name=name)
    if isinstance(result, int | float):
        value = float(result)
        if value != value:  # NaN
            raise ValueError("the grader returned NaN")
        return Score.from_value(value, pass_at=pass_at, name=name)
    raise TypeError(
        f"grader {name!r} returned {type(result).__name__}; expected bool, float or Score"
    )


async def run_grader(g: Grader, ctx: GradeContext) -> Score:
    """Run one grader and return its score; an exception becomes a score with verdict `error`."""
    name = g.name
    try:
        if g.blocking:
            result: object = await run_blocking(g.grade, ctx)  # abandoned at the timeout
        else:
            result = g.grade(ctx)
        if inspect.isawaitable(result):
            result = await result
        return to_score(result, name=name, pass_at=g.pass_at)
    except Exception as exc:
        return Score.from_error(ErrorInfo.from_exception(exc, phase="grading"), name=name)


def combine_verdicts(verdicts: list[Verdict]) -> Verdict:
    """The verdict of several checks that must all hold: fail, then error, then unknown."""
    for worst in (Verdict.FAIL, Verdict.ERROR, Verdict.UNKNOWN):
        if worst in verdicts:
            return worst
    return Verdict.PASS


def trial_verdict(status: TrialStatus, scores: Sequence[Score]) -> Verdict:
    """A trial's verdict (DESIGN §2): `error` when it did not complete (setup, the agent or
    capture raised, or it timed out), otherwise its scores combined (`combine_verdicts`); a
    score waiting for a reviewer counts as `unknown`.

    The one rule for the runner and for a label applied later. An `expect="failure"` task
    needs nothing more: an agent that failed as expected completes, its failure on the outcome
    for the graders to check, while a timeout or a broken harness never counts as that failure
    and leaves the trial not completed.
    """
    if status is not TrialStatus.COMPLETED:
        return Verdict.ERROR
    return combine_verdicts([s.verdict for s in scores])
