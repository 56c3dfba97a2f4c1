"""A suite file whose agent is a command: run in the workspace, tools served over MCP."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from trialkit import run_sync
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.loaders.suite_file import load_suite_file
from trialkit.loaders.target import load_target

FAKE = Path(__file__).resolve().parents[1] / "agents" / "fake_claude.py"

TOOLS = '''
from pathlib import Path

from trialkit.harness import TrialContext


def save_note(ctx: TrialContext, name: str, text: str) -> str:
    """Save a note in the workspace."""
    (Path(ctx.world.path) / name).write_text(text)
    return f"saved {name}"
'''


def make_suite(folder: Path) -> Path:
    (folder / "fixtures" / "notes").mkdir(parents=True)
    (folder / "fixtures" / "notes" / "index.md").write_text("# Notes\n")
    (folder / "note_tools.py").write_text(TOOLS)
    call = "mcp save_note " + json.dumps({"name": "sleep.md", "text": "slept 6h"})
    suite = f"""
        id: cli-agent
        kind: regression
        trials: 2
        harness:
          command: [{json.dumps(sys.executable)}, "{FAKE}", --output-format, stream-json,
                    --mcp-config, "{{mcp_config}}"]
          tools: [note_tools:save_note]
          timeout: 60
          env: {{FAKE_MARK: from-the-suite}}
        environment: {{workspace: fixtures/notes}}
        tasks:
          - id: file-note
            input: {json.dumps(call + chr(10) + "say filed")}
            graders:
              - tool_called: save_note
              - file_contains: {{path: sleep.md, text: slept 6h}}
              - only_changed: [sleep.md]
              - contains: filed
    """
    (folder / "suite.yaml").write_text(textwrap.dedent(suite))
    return folder


def test_a_command_harness_from_a_suite_file_serves_tools_and_is_graded(tmp_path: Path) -> None:
    folder = make_suite(tmp_path / "suite")
    suite = load_target(str(folder))
    assert isinstance(suite.harness, SubprocessAgent)
    report = run_sync(suite)
    (task,) = report.tasks
    assert (task.verdict, task.passed, task.trials) == ("pass", 2, 2), [
        (s.name, s.rationale) for r in task.results for s in r.scores if s.verdict != "pass"
    ]


def test_suite_dir_is_replaced_in_the_command(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "id: s\nharness: {command: [python, '{suite_dir}/agent.py']}\ntasks: [{id: a, input: x}]\n"
    )
    suite = load_suite_file(tmp_path / "suite.yaml")
    assert isinstance(suite.harness, SubprocessAgent)
    assert suite.harness.command == ["python", f"{tmp_path.resolve()}/agent.py"]
