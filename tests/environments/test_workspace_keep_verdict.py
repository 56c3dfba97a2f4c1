"""With keep="failing", the runner tells the workspace the verdict: failing trials are kept."""

from __future__ import annotations

from pathlib import Path

from trialkit import Suite, Task, TrialContext, graders, run_sync
from trialkit.environments import Workspace


def test_failing_trials_keep_their_workspace_and_passing_ones_do_not(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "notes.md").write_text("# Notes\n")
    keep_dir = tmp_path / "kept"

    def agent(prompt: str, ctx: TrialContext) -> str:
        (Path(ctx.world.path) / "notes.md").write_text(f"# Notes\n{prompt}\n")
        return prompt

    suite = Suite(
        id="s",
        environment=Workspace(fixture, keep_dir=keep_dir, temp_dir=tmp_path),
        harness=agent,
        tasks=[
            Task(id="good", input="fine", graders=[graders.file_contains("notes.md", "fine")]),
            Task(id="bad", input="oops", graders=[graders.file_contains("notes.md", "fine")]),
        ],
    )
    report = run_sync(suite)
    assert [t.verdict for t in report.tasks] == ["pass", "fail"]
    kept = sorted(p.name for p in keep_dir.glob("*/*"))
    assert kept == ["bad#0"]
    (folder,) = keep_dir.glob("*/bad#0")
    assert (folder / "notes.md").read_text() == "# Notes\noops\n"
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith("trialkit-")]
    assert leftovers == []
    diff = report.task("bad").results[0]
    assert diff.verdict == "fail"
