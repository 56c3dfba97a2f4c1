"""Probes: queries of the world between turns, and the `probe` grader over their answers."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from trialkit import (
    Environment,
    GradeContext,
    Reply,
    Score,
    Suite,
    SuiteError,
    Task,
    Transcript,
    Turns,
    graders,
    run_sync,
)
from trialkit.graders.base import Grader
from trialkit.harness.base import Session, TrialContext


class Folder(Environment):
    """A temp folder per trial (the world is its path)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def setup(self, task: Task, trial_index: int) -> Any:
        return Path(tempfile.mkdtemp(prefix=f"{task.id}-{trial_index}-", dir=self.root))


class Scribe(Session):
    """Writes `note.md` only when told "write"; says "done" otherwise."""

    def __init__(self, ctx: TrialContext) -> None:
        self.folder: Path = ctx.world

    async def send(self, message: object) -> Reply:
        if message == "write":
            (self.folder / "note.md").write_text("hello")
            return Reply(output="written")
        if message == "give up":
            return Reply(is_error=True, error="cannot")
        return Reply(output="done")


class Ran:
    def __init__(self, transcript: Transcript, scores: dict[str, Score], verdict: str) -> None:
        self.transcript, self.scores, self.verdict = transcript, scores, verdict


def run(tmp_path: Path, turns: list[str], *checks: Grader, **probes: Any) -> Ran:
    seen: list[Transcript] = []

    def keep(ctx: GradeContext) -> bool:
        seen.append(ctx.transcript)
        return True

    suite = Suite(
        id="s",
        harness=Scribe,
        environment=Folder(tmp_path),
        tasks=[Task(id="t", input=Turns(*turns), graders=[keep, *checks], probes=probes)],
        trials=1,
    )
    (result,) = run_sync(suite).tasks[0].results
    return Ran(seen[0], {s.name: s for s in result.scores}, result.verdict)


def note_exists(folder: Path) -> bool:
    return (folder / "note.md").exists()


def test_probes_record_the_world_after_each_turn(tmp_path: Path) -> None:
    ran = run(
        tmp_path, ["hi", "write", "bye"], note=note_exists, files=lambda f: len(list(f.iterdir()))
    )
    assert [t.probes for t in ran.transcript.turns] == [
        {"note": False, "files": 0},
        {"note": True, "files": 1},
        {"note": True, "files": 1},
    ]


def test_probe_grades_when_a_write_landed(tmp_path: Path) -> None:
    ran = run(
        tmp_path,
        ["hi", "write"],
        graders.probe("note", values=[False, True]),
        graders.probe("note", False, turn=0, name="not before asked"),
        graders.probe("note", True, name="there at the end"),
        note=note_exists,
    )
    assert ran.verdict == "pass"
    assert ran.scores["probe(note)"].rationale == "after each turn: [False, True]"

    early = run(
        tmp_path, ["write", "hi"], graders.probe("note", values=[False, True]), note=note_exists
    )
    assert early.verdict == "fail"
    assert "expected [False, True]" in (early.scores["probe(note)"].rationale or "")


def test_probe_with_a_predicate_and_a_turn_the_agent_never_reached(tmp_path: Path) -> None:
    ran = run(
        tmp_path,
        ["write", "give up", "write"],
        graders.probe("note", where=lambda v: v is True, turn=0, name="first"),
        graders.probe("note", True, turn=2, name="third"),
        note=note_exists,
    )
    assert ran.scores["first"].verdict == "pass"
    third = ran.scores["third"]
    assert third.verdict == "fail"
    assert "never finished turn 2" in (third.rationale or "")


def test_a_probe_that_raises_errors_the_grader_not_the_trial(tmp_path: Path) -> None:
    def broken(folder: Path) -> bool:
        raise OSError("disk gone")

    ran = run(
        tmp_path, ["hi"], graders.probe("broken", True), graders.probe("nope", True), broken=broken
    )
    assert ran.transcript.turns[0].probe_errors == {"broken": "OSError: disk gone"}
    assert ran.scores["probe(broken)"].verdict == "error"
    assert "raised after turn 0" in ran.scores["probe(broken)"].rationale
    assert ran.scores["probe(nope)"].verdict == "error"
    assert "no probe named 'nope'" in ran.scores["probe(nope)"].rationale
    assert ran.verdict == "error"


def test_async_probes_and_suite_probes_with_unserialisable_answers(tmp_path: Path) -> None:
    async def where(folder: Path) -> object:
        return {"path": folder, "nan": float("nan")}

    seen: list[Transcript] = []
    suite = Suite(
        id="s",
        harness=Scribe,
        environment=Folder(tmp_path),
        probes={"where": where, "note": note_exists},
        tasks=[
            Task(
                id="t",
                input="write",
                graders=[lambda ctx: bool(seen.append(ctx.transcript)) or True],
                probes={"note": lambda f: "overridden"},
            )
        ],
        trials=1,
    )
    run_sync(suite)
    (turn,) = seen[0].turns
    assert turn.probes["note"] == "overridden"
    assert turn.probes["where"]["nan"] is None
    assert turn.probes["where"]["path"].startswith(str(tmp_path / "t-0-"))  # paths as text


def test_probe_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        graders.probe("x")
    with pytest.raises(ValueError, match="exactly one of"):
        graders.probe("x", True, values=[True])
    with pytest.raises(ValueError, match="drop turn"):
        graders.probe("x", values=[True], turn=1)
    with pytest.raises(SuiteError, match="probes: x: expected a callable"):
        Task(id="t", input="go", probes={"x": 3})  # type: ignore[dict-item]
