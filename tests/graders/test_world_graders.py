import json
import os
import re
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from trialkit import GradeContext, Outcome, Score, Task, Transcript, Verdict
from trialkit.graders.base import Grader, run_grader
from trialkit.graders.state import state
from trialkit.graders.timing import NOT_DELIVERED, duration, measured_seconds
from trialkit.graders.workspace import (
    file_absent,
    file_contains,
    file_exists,
    file_json,
    glob_match,
    only_changed,
    unchanged,
)
from trialkit.outcome import FileChange, WorkspaceDiff
from trialkit.transcript import Timing


def make_ctx(
    world: Any = None, *, changes: dict[str, str] | None = None, timing: Timing | None = None
) -> GradeContext:
    diff = None
    if changes is not None:
        diff = WorkspaceDiff(files=[FileChange(path=p, change=c) for p, c in changes.items()])
    return GradeContext(
        task=Task(id="t", input="x"),
        trial_index=0,
        transcript=Transcript(timing=timing or Timing()),
        outcome=Outcome(diff=diff),
        world=world,
    )


def grade(g: Grader, ctx: GradeContext) -> Score:
    return anyio.run(run_grader, g, ctx)


@pytest.fixture
def ws(tmp_path: Path) -> GradeContext:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    return 42\n")
    (tmp_path / "report.json").write_text(json.dumps({"total": 3, "items": ["a", "b", "c"]}))
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    return make_ctx(SimpleNamespace(path=tmp_path))


# -- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", "C:\\x", "", "a\\..\\..\\b"])
def test_paths_must_stay_in_the_workspace(path: str) -> None:
    for make in (file_exists, file_absent, file_json, only_changed, unchanged):
        with pytest.raises(ValueError, match=r"workspace|non-empty"):
            make(path)
    with pytest.raises(ValueError, match=r"workspace|non-empty"):
        file_contains(path, "x")


@pytest.mark.parametrize(
    "g",
    [file_exists("a"), file_absent("a"), file_contains("a", "x"), file_json("a")],
)
def test_file_graders_error_without_a_workspace(g: Grader) -> None:
    for world in (None, SimpleNamespace(db="x")):
        s = grade(g, make_ctx(world))
        assert s.verdict is Verdict.ERROR
        assert s.rationale is not None
        assert "the task has no workspace" in s.rationale


def test_diff_graders_error_without_a_diff() -> None:
    for g in (only_changed("*.py"), unchanged("*.py")):
        s = grade(g, make_ctx())
        assert s.verdict is Verdict.ERROR
        assert "the task has no workspace diff" in (s.rationale or "")


# -- files ---------------------------------------------------------------------------------


def test_file_exists(ws: GradeContext) -> None:
    assert grade(file_exists("src/app.py"), ws).passed
    assert grade(file_exists("./src/app.py"), ws).passed
    s = grade(file_exists("src/nope.py"), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "src/nope.py does not exist")
    s = grade(file_exists("src"), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "src is a folder, not a file")
    assert s.name == "file_exists('src')"


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks")
def test_a_symlink_out_of_the_workspace_does_not_count(ws: GradeContext, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret")
    try:
        os.symlink(outside, ws.world.path / "link.txt")
        s = grade(file_exists("link.txt"), ws)
        assert (s.verdict, s.rationale) == (Verdict.FAIL, "link.txt points outside the workspace")
        assert not grade(file_contains("link.txt", "secret"), ws).passed
    finally:
        outside.unlink()


def test_file_absent(ws: GradeContext) -> None:
    assert grade(file_absent("gone.txt"), ws).passed
    s = grade(file_absent("src/app.py"), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "src/app.py exists (a file)")
    assert grade(file_absent("src"), ws).rationale == "src exists (a folder)"


def test_file_contains_text(ws: GradeContext) -> None:
    assert grade(file_contains("src/app.py", "RETURN 42"), ws).passed
    s = grade(file_contains("src/app.py", "RETURN 42", case_sensitive=True), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "src/app.py does not contain 'RETURN 42'")
    s = grade(file_contains("missing.txt", "x"), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "missing.txt does not exist")
    s = grade(file_contains("blob.bin", "x"), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "blob.bin is not UTF-8 text")
    assert grade(file_contains("src", "x"), ws).rationale == "src is not a file"


def test_file_contains_pattern(ws: GradeContext) -> None:
    s = grade(file_contains("src/app.py", pattern=r"^\s+return \d+$"), ws)
    assert (s.verdict, s.rationale) == (Verdict.PASS, "matched '    return 42'")
    assert grade(file_contains("src/app.py", pattern="DEF MAIN"), ws).passed
    s = grade(file_contains("src/app.py", pattern="DEF MAIN", case_sensitive=True), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "src/app.py does not match /DEF MAIN/")


def test_file_contains_needs_exactly_one_of_text_and_pattern() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        file_contains("a")
    with pytest.raises(ValueError, match="exactly one"):
        file_contains("a", "x", pattern="y")
    with pytest.raises(ValueError, match="invalid regular expression"):
        file_contains("a", pattern="(")


def test_file_json(ws: GradeContext) -> None:
    assert grade(file_json("report.json"), ws).passed
    assert grade(file_json("report.json", where=lambda v: v["total"] == 3), ws).passed

    def has_ten(v: Any) -> bool:
        return bool(v["total"] == 10)

    s = grade(file_json("report.json", where=has_ten), ws)
    assert (s.verdict, s.rationale) == (Verdict.FAIL, "report.json does not satisfy has_ten")
    s = grade(file_json("bad.json"), ws)
    assert s.verdict is Verdict.FAIL
    assert (s.rationale or "").startswith("bad.json is not JSON:")
    schema = {"type": "object", "properties": {"items": {"type": "array", "maxItems": 2}}}
    s = grade(file_json("report.json", schema=schema), ws)
    assert s.verdict is Verdict.FAIL
    assert (s.rationale or "").startswith("report.json does not match the schema at items:")
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        file_json("report.json", schema={"type": 12})


# -- diffs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("a/b/c.py", "*.py", True),
        ("c.py", "*.py", True),
        ("src/a.py", "src/*.py", True),
        ("src/x/a.py", "src/*.py", False),
        ("src/a.py", "src/**/*.py", True),
        ("src/x/y/a.py", "src/**/*.py", True),
        ("lib/a.py", "src/**", False),
        ("src/x/y", "src/**", True),
        ("build/x/y.o", "build/", True),
        ("a/build/y.o", "build/", False),
        ("a1.txt", "a?.txt", True),
        ("ab.txt", "a[!b].txt", False),
        ("ac.txt", "a[!b].txt", True),
        ("a.py", "a.p", False),
        ("src.py", "src", False),
    ],
)
def test_glob_match(path: str, pattern: str, expected: bool) -> None:
    assert glob_match(path, pattern) is expected


CHANGES = {"src/app.py": "modified", "tests/test_app.py": "added", "README.md": "deleted"}


def test_only_changed() -> None:
    ctx = make_ctx(changes=CHANGES)
    s = grade(only_changed("src/**", "tests/**", "*.md"), ctx)
    assert (s.verdict, s.rationale) == (Verdict.PASS, "3 file(s) changed, all allowed")
    s = grade(only_changed("src/**"), ctx)
    assert s.verdict is Verdict.FAIL
    assert s.rationale == (
        "changed outside ['src/**']: tests/test_app.py (added), README.md (deleted)"
    )
    assert s.name == "only_changed('src/**')"
    assert grade(only_changed(), make_ctx(changes={})).passed
    assert not grade(only_changed(), ctx).passed


def test_unchanged() -> None:
    ctx = make_ctx(changes=CHANGES)
    assert grade(unchanged("docs/**", "*.cfg"), ctx).passed
    s = grade(unchanged("tests/", "*.md"), ctx)
    assert (s.verdict, s.rationale) == (
        Verdict.FAIL,
        "changed: tests/test_app.py (added), README.md (deleted)",
    )
    with pytest.raises(ValueError, match="at least one glob"):
        unchanged()


# -- state ---------------------------------------------------------------------------------


def test_state_defaults_to_truthiness_and_shows_the_value() -> None:
    world = SimpleNamespace(rows=[1, 2, 3])
    s = grade(state(lambda w: w.rows), make_ctx(world))
    assert (s.verdict, s.rationale) == (Verdict.PASS, "value: [1, 2, 3]")
    assert s.name == "state(<lambda>)"
    s = grade(state(lambda w: [], name="has rows"), make_ctx(world))
    assert (s.verdict, s.rationale, s.name) == (Verdict.FAIL, "value: []", "has rows")


def test_state_scores_with_bool_float_or_score() -> None:
    world = SimpleNamespace(n=3)

    def count(w: Any) -> int:
        return int(w.n)

    assert grade(state(count, lambda n: n == 3), make_ctx(world)).passed
    s = grade(state(count, lambda n: n / 4), make_ctx(world))
    assert (s.verdict, s.value) == (Verdict.FAIL, 0.75)
    assert grade(state(count, lambda n: n / 4, pass_at=0.7), make_ctx(world)).passed
    s = grade(state(count, lambda n: Score.from_bool(False, rationale="too few")), make_ctx(world))
    assert (s.verdict, s.rationale, s.name) == (Verdict.FAIL, "too few (value: 3)", "state(count)")


def test_state_truncates_long_values() -> None:
    s = grade(state(lambda w: "x" * 1000), make_ctx(SimpleNamespace()))
    assert s.rationale is not None
    assert len(s.rationale) < 220
    assert s.rationale.endswith("…")


def test_state_runs_sync_queries_in_a_thread_and_awaits_async_ones() -> None:
    main = threading.get_ident()
    seen: list[int] = []

    def sync_query(w: Any) -> bool:
        seen.append(threading.get_ident())
        return True

    async def async_query(w: Any) -> int:
        await anyio.lowlevel.checkpoint()
        return 5

    async def async_score(v: int) -> bool:
        return v == 5

    assert grade(state(sync_query), make_ctx(SimpleNamespace())).passed
    assert seen
    assert seen[0] != main
    assert grade(state(async_query, async_score), make_ctx(SimpleNamespace())).passed


def test_state_needs_a_world_unless_it_queries_the_context() -> None:
    s = grade(state(lambda w: True), make_ctx())
    assert s.verdict is Verdict.ERROR
    assert "no world" in (s.rationale or "")
    ctx = make_ctx()
    assert grade(state(lambda c: c.task.id == "t", of="context"), ctx).passed


def test_state_query_errors_become_error_scores() -> None:
    def broken(w: Any) -> Any:
        raise RuntimeError("db down")

    s = grade(state(broken), make_ctx(SimpleNamespace()))
    assert (s.verdict, s.rationale) == (Verdict.ERROR, "RuntimeError: db down")
    with pytest.raises(TypeError, match="callable"):
        state(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="of must be"):
        state(bool, of="x")  # type: ignore[arg-type]


# -- duration ------------------------------------------------------------------------------


def timed(total: float = 0.0, agent: float = 0.0, **kw: Any) -> GradeContext:
    return make_ctx(timing=Timing(total_s=total, agent_s=agent), **kw)


def yes(ctx: GradeContext) -> bool:
    return True


def test_duration_passes_within_the_target() -> None:
    s = grade(duration(10, delivered=yes), timed(total=4.0))
    assert (s.verdict, s.value) == (Verdict.PASS, 1.0)
    assert s.rationale == "trial took 4.00 s (target 10 s)"
    assert s.name == "duration(10, trial)"


def test_duration_scores_linearly_between_target_and_budget() -> None:
    g = duration(10, 20, delivered=yes)
    s = grade(g, timed(total=15.0))
    assert (s.verdict, s.value) == (Verdict.FAIL, 0.5)
    assert s.rationale == "trial took 15.00 s, over the target 10 s (budget 20 s)"
    assert grade(g, timed(total=17.5)).value == pytest.approx(0.25)
    s = grade(g, timed(total=25.0))
    assert (s.verdict, s.value, s.rationale) == (
        Verdict.FAIL,
        0.0,
        "trial took 25.00 s, over the budget 20 s",
    )
    s = grade(duration(10, delivered=yes), timed(total=11.0))
    assert (s.value, s.rationale) == (0.0, "trial took 11.00 s, over the target 10 s")


def test_duration_measures_the_agent_or_the_trial_so_far() -> None:
    assert grade(duration(5, delivered=yes, measure="agent"), timed(total=50, agent=3)).passed
    assert not grade(duration(5, delivered=yes), timed(total=50, agent=3)).passed
    # while grading, total_s is not known yet: setup + agent + capture
    so_far = Timing(setup_s=1.0, agent_s=2.0, capture_s=0.5)
    assert measured_seconds(so_far, "trial") == 3.5
    assert measured_seconds(so_far, "agent") == 2.0


def test_duration_does_not_pass_work_that_was_not_delivered(tmp_path: Path) -> None:
    def no(ctx: GradeContext) -> bool:
        return False

    s = grade(duration(10, delivered=no), timed(total=0.1))
    assert (s.verdict, s.value, s.rationale) == (Verdict.FAIL, 0.0, NOT_DELIVERED)
    # a grader as the proof, with its reason carried along
    world = SimpleNamespace(path=tmp_path)
    s = grade(duration(10, delivered=file_exists("out.csv")), timed(total=0.1, world=world))
    assert s.verdict is Verdict.FAIL
    assert s.rationale == f"{NOT_DELIVERED} (file_exists('out.csv'): out.csv does not exist)"
    (tmp_path / "out.csv").write_text("a,b\n")
    assert grade(
        duration(10, delivered=file_exists("out.csv")), timed(total=0.1, world=world)
    ).passed


def test_duration_accepts_async_proofs_and_errors_when_the_proof_errors() -> None:
    async def produced(ctx: GradeContext) -> bool:
        return True

    assert grade(duration(10, delivered=produced), timed(total=1)).passed

    def crash(ctx: GradeContext) -> bool:
        raise OSError("disk gone")

    s = grade(duration(10, delivered=crash), timed(total=1))
    assert s.verdict is Verdict.ERROR
    assert s.rationale == "the delivered check (crash) errored: OSError: disk gone"


def test_duration_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="budget_seconds"):
        duration(10, 5, delivered=yes)
    with pytest.raises(ValueError, match="target_seconds"):
        duration(-1, delivered=yes)
    with pytest.raises(ValueError, match="measure"):
        duration(1, delivered=yes, measure="wall")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        duration(1, delivered=3)  # type: ignore[arg-type]
    assert re.fullmatch(
        r"duration\(1, 2, agent\)", duration(1, 2, delivered=yes, measure="agent").name
    )
