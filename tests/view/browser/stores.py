"""A store filled by real runs for the browser tests: tool calls and model calls (the
tool-calling agent on a scripted model), a workspace diff, hostile outputs, an error, two runs
to compare, and one run with more trials than a page lists."""

from __future__ import annotations

from pathlib import Path

from trialkit import Suite, Task, graders, run_sync
from trialkit.environments.workspace import Workspace
from trialkit.harness.base import TrialContext
from trialkit.harness.tool_agent import ToolAgent
from trialkit.models import ModelRequest, ScriptedModel
from trialkit.store import Store
from trialkit.transcript import ToolCall, current_recorder

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)>'
MANY_TRIALS = 130
"""More than one page of the trial list (100)."""


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def tool_suite() -> Suite:
    def respond(request: ModelRequest, trial: int) -> str | ToolCall:
        if request.messages[-1].role == "tool":
            return "2 + 3 = 5"
        return ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})

    agent = ToolAgent(ScriptedModel("adder", respond), [add], system="Use the tools.")
    return Suite(
        id="tools",
        kind="capability",
        trials=2,
        harness=agent,
        tasks=[Task(id="adds", input="What is 2 + 3?", graders=[graders.contains("5")])],
    )


def workspace_suite(fixture: Path, tmp: Path, *, fixed: bool) -> Suite:
    def agent(prompt: str, ctx: TrialContext) -> str:
        recorder = current_recorder()
        if recorder is not None:
            recorder.add_reasoning(f"thinking about {prompt!r}")
        if "hostile" in prompt:
            return HOSTILE
        if "crash" in prompt:
            raise RuntimeError(f"the tool server went away {HOSTILE}")
        if "edit" in prompt:
            path = Path(ctx.world.path) / "notes.txt"
            path.write_text("one\nTWO\nthree\nfour\n")
            (Path(ctx.world.path) / "new.txt").write_text("added\n")
            return "edited"
        return "Madrid" if fixed else "Berlin"

    environment = Workspace(fixture, keep="none", temp_dir=tmp)
    return Suite(
        id="workspace",
        kind="regression",
        trials=2,
        harness=agent,
        environment=environment,
        tasks=[
            Task(id="spain", input="Capital of Spain?", graders=[graders.contains("madrid")]),
            Task(id="hostile <b>&? 100%", input="hostile please", graders=[graders.contains("ok")]),
            Task(id="edit", input="edit the notes", graders=[graders.contains("edited")]),
            Task(id="crash", input="crash please", graders=[graders.contains("x")]),
        ],
    )


def many_suite() -> Suite:
    return Suite(
        id="many",
        kind="capability",
        trials=MANY_TRIALS,
        harness=lambda prompt: "yes",
        tasks=[
            Task(id="alpha-one", input="a", graders=[graders.contains("yes")]),
            Task(id="beta-two", input="b", graders=[graders.contains("no")]),
        ],
    )


def fill(store: Store, folder: Path) -> None:
    fixture = folder / "fixture"
    fixture.mkdir()
    (fixture / "notes.txt").write_text("one\ntwo\nthree\n")
    tmp = folder / "workspaces"
    tmp.mkdir()
    run_sync(tool_suite(), store=store, name="tools")
    run_sync(workspace_suite(fixture, tmp, fixed=False), store=store, name="before")
    run_sync(workspace_suite(fixture, tmp, fixed=True), store=store, name="after")
    run_sync(many_suite(), store=store, name="many")
