"""`state`: grade any fact about the environment that a user query can read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from trialkit._calls import call_user
from trialkit.graders.base import GradeContext, Grader, to_score
from trialkit.score import Score


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class NoWorldError(RuntimeError):
    """A `state` grader ran for a task without an environment world."""


@dataclass(init=False)
class state(Grader):
    """Query the environment and grade the value.

    `query` receives `ctx.world` (what the environment's setup returned; with `of="context"`,
    the whole `GradeContext`) and returns any value. `score` turns that value into a bool, a
    float in [0, 1] (passing at `pass_at`) or a `Score`; without it the value's truthiness decides.
    Both may be sync (run in a worker thread) or async. The rationale shows the value.

    ```python
    state(lambda db: db.execute("select count(*) from users").fetchone()[0],
          lambda n: n == 3, name="three users")
    ```
    """

    query: Callable[[Any], Any]
    score: Callable[[Any], Any] | None
    of: Literal["world", "context"]
    pass_at: float
    _name: str | None = field(repr=False)

    def __init__(
        self,
        query: Callable[[Any], Any],
        score: Callable[[Any], Any] | None = None,
        *,
        name: str | None = None,
        of: Literal["world", "context"] = "world",
        pass_at: float = 1.0,
    ) -> None:
        if not callable(query):
            raise TypeError(f"state: query must be callable, got {type(query).__name__}")
        if score is not None and not callable(score):
            raise TypeError(f"state: score must be callable, got {type(score).__name__}")
        if of not in ("world", "context"):
            raise ValueError(f"state: of must be 'world' or 'context', got {of!r}")
        if not 0.0 <= pass_at <= 1.0:
            raise ValueError(f"state: pass_at must be within [0, 1], got {pass_at}")
        self.query, self.score, self._name, self.of, self.pass_at = (
            query,
            score,
            name,
            of,
            pass_at,
        )

    @property
    def name(self) -> str:
        if self._name:
            return self._name
        return f"state({getattr(self.query, '__name__', type(self.query).__name__)})"

    async def grade(self, ctx: GradeContext) -> Score:
        if self.of == "context":
            arg: Any = ctx
        else:
            if ctx.world is None:
                raise NoWorldError(
                    "the task has no world to query (its environment's setup returned None); "
                    "use of='context' to query the GradeContext"
                )
            arg = ctx.world
        value = await call_user(self.query, arg)
        shown = f"value: {_short(repr(value))}"
        result = bool(value) if self.score is None else await call_user(self.score, value)
        scored = to_score(result, name=self.name, pass_at=self.pass_at)
        scored.rationale = shown if not scored.rationale else f"{scored.rationale} ({shown})"
        return scored


_UNSET: Any = object()


@dataclass(init=False)
class probe(Grader):
    """Grade what a task's probe answered between turns (see `Task.probes`): *when* a fact
    about the world became true, not only whether it holds at the end.

    - `probe("note_filed", values=[False, True])`: the answers after each turn, in order.
    - `probe("note_filed", True, turn=1)`: the answer after turn 1 (0-based; -1, the default,
      is the last turn the agent took).
    - `probe("rows", where=lambda n: n >= 3, turn=-1)`: a predicate on the answer.

    A probe that raised after the turn in question, or one the task does not define, makes the
    score an error; a turn the agent never reached (it stopped early) makes it a fail.
    """

    probe_name: str
    expected: Any
    values: list[Any] | None
    turn: int
    where: Callable[[Any], Any] | None
    _name: str | None = field(repr=False)

    def __init__(
        self,
        probe_name: str,
        expected: Any = _UNSET,
        *,
        turn: int = -1,
        values: list[Any] | None = None,
        where: Callable[[Any], Any] | None = None,
        name: str | None = None,
    ) -> None:
        given = [expected is not _UNSET, values is not None, where is not None]
        if sum(given) != 1:
            raise ValueError(
                f"probe({probe_name!r}): give exactly one of an expected value, values=[...] "
                "(one per turn) or where=..."
            )
        if values is not None and turn != -1:
            raise ValueError(f"probe({probe_name!r}): values=[...] covers every turn; drop turn")
        if where is not None and not callable(where):
            raise TypeError(f"probe({probe_name!r}): where must be callable")
        self.probe_name, self.expected, self.values = probe_name, expected, values
        self.turn, self.where, self._name = turn, where, name

    @property
    def name(self) -> str:
        return self._name or f"probe({self.probe_name})"

    async def grade(self, ctx: GradeContext) -> Score:
        turns = ctx.transcript.turns
        seen = [
            t for t in turns if self.probe_name in t.probes or self.probe_name in t.probe_errors
        ]
        if turns and not seen:
            raise LookupError(
                f"no probe named {self.probe_name!r} ran in this trial; define it in the "
                "task's or the suite's probes"
            )
        for t in turns:
            if self.probe_name in t.probe_errors:
                raise RuntimeError(
                    f"probe {self.probe_name!r} raised after turn {t.index}: "
                    f"{t.probe_errors[self.probe_name]}"
                )
        answers = [t.probes[self.probe_name] for t in turns]
        if self.values is not None:
            ok = answers == list(self.values)
            return Score.from_bool(
                ok,
                name=self.name,
                rationale=f"after each turn: {_short(repr(answers))}"
                + ("" if ok else f", expected {_short(repr(self.values))}"),
            )
        try:
            answer = answers[self.turn]
        except IndexError:
            return Score.from_bool(
                False,
                name=self.name,
                rationale=f"the agent never finished turn {self.turn} ({len(turns)} turn(s) taken)",
            )
        at = f"after turn {self.turn if self.turn >= 0 else len(turns) + self.turn}"
        if self.where is not None:
            result = await call_user(self.where, answer)
            scored = to_score(result, name=self.name)
            shown = f"{at}: {_short(repr(answer))}"
            scored.rationale = shown if not scored.rationale else f"{scored.rationale} ({shown})"
            return scored
        ok = answer == self.expected
        return Score.from_bool(
            ok,
            name=self.name,
            rationale=f"{at}: {_short(repr(answer))}"
            + ("" if ok else f", expected {_short(repr(self.expected))}"),
        )
