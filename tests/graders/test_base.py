import threading
import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.graders._ctx import make_ctx
from trialkit import GradeContext, Score, Verdict, grader, graders
from trialkit.graders.base import as_grader, run_grader, shared, to_score


def run(g: Any, ctx: GradeContext | None = None) -> Score:
    return anyio.run(run_grader, as_grader(g), ctx or make_ctx("Paris"))


def test_grader_decorator_bool_float_and_score() -> None:
    @grader
    def says_paris(ctx: GradeContext) -> bool:
        return "Paris" in ctx.output

    @grader(pass_at=0.5, name="half")
    def half(ctx: GradeContext) -> float:
        return 0.5

    @grader
    def full(ctx: GradeContext) -> Score:
        return Score(value=0.2, verdict=Verdict.UNKNOWN, rationale="cannot tell")

    assert run(says_paris).verdict is Verdict.PASS
    assert run(says_paris).name == "says_paris"
    assert (run(half).verdict, run(half).name) == (Verdict.PASS, "half")
    s = run(full)
    assert (s.verdict, s.name, s.rationale) == (Verdict.UNKNOWN, "full", "cannot tell")
    assert says_paris(make_ctx("Paris")) is True  # still callable as a function


@pytest.mark.parametrize(("value", "expected"), [(1.7, 1.0), (-3.0, 0.0), (0.99, 0.99)])
def test_floats_are_clamped_and_pass_at_one_by_default(value: float, expected: float) -> None:
    s = to_score(value, name="x")
    assert s.value == expected
    assert s.passed is (expected >= 1.0)


def test_bad_return_types_and_nan_are_errors() -> None:
    assert run(lambda ctx: "yes").verdict is Verdict.ERROR
    s = run(lambda ctx: float("nan"))
    assert s.verdict is Verdict.ERROR
    assert s.rationale == "ValueError: the grader returned NaN"
    with pytest.raises(ValueError, match="pass_at must be within"):
        grader(pass_at=2.0)


def test_async_graders() -> None:
    async def slow(ctx: GradeContext) -> bool:
        await anyio.lowlevel.checkpoint()
        return True

    assert run(slow).passed
    assert run(grader(slow)).passed


def test_blocking_graders_run_in_worker_threads() -> None:
    seen: list[str] = []

    def where(ctx: GradeContext) -> bool:
        seen.append(threading.current_thread().name)
        return True

    run(where)
    assert seen and seen[0] != threading.main_thread().name


def test_shared_computes_once_across_graders_and_threads() -> None:
    calls = []

    @shared
    def parsed(ctx: GradeContext) -> int:
        calls.append(1)
        time.sleep(0.05)
        return len(ctx.output)

    ctx = make_ctx("Paris")

    async def main() -> list[Score]:
        scores: list[Score] = []

        async def one(i: int) -> None:
            scores.append(await run_grader(as_grader(lambda c: parsed(c) == 5), ctx))

        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, i)
        return scores

    scores = anyio.run(main)
    assert [s.verdict for s in scores] == [Verdict.PASS] * 4
    assert len(calls) == 1
    assert parsed(make_ctx("Rome")) == 4  # a new trial computes again
    assert len(calls) == 2


def test_shared_remembers_exceptions() -> None:
    calls = []

    @shared
    def broken(ctx: GradeContext) -> int:
        calls.append(1)
        raise ValueError("bad output")

    ctx = make_ctx("x")
    for _ in range(2):
        assert run(lambda c: broken(c) > 0, ctx).verdict is Verdict.ERROR
    assert len(calls) == 1


def test_not_a_grader() -> None:
    with pytest.raises(TypeError, match="not a grader"):
        as_grader(42)  # type: ignore[arg-type]


def test_builtin_graders_are_not_blocking_but_predicates_are() -> None:
    assert not graders.contains("x").blocking
    assert graders.predicate("p", lambda c: True).blocking
