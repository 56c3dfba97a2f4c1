"""The suites the command-line agent tests run (`trialkit run tests/cli_agents/suites.py:claude`).

What differs between the phases of a test comes from the environment, so that the same suite
file records and replays: `CLI_AGENT` (the program), `CLI_UPSTREAM` (the fake provider),
`CLI_TZ` (the agent's time zone: another zone is another day's date) and `CLI_PROMPT` (a
changed prompt must be a strict miss).
"""

from __future__ import annotations

import os
from pathlib import Path

from trialkit import Suite, Task
from trialkit.environments.workspace import Workspace
from trialkit.graders import file_contains, only_changed, tool_called
from trialkit.harness import SubprocessAgent

FIXTURE = Path(__file__).parent / "fixture"
PROMPT = "Create hello.txt in the working folder with the text hello."


def _suite(agent: SubprocessAgent, tool: str) -> Suite:
    return Suite(
        id=f"cli-{agent.name}",
        kind="regression",
        trials=3,
        harness=agent,
        environment=Workspace(FIXTURE),
        tasks=[
            Task(
                id="write-hello",
                input=os.environ.get("CLI_PROMPT", PROMPT),
                timeout=120,
                graders=[
                    file_contains("hello.txt", "hello"),
                    only_changed("hello.txt"),
                    tool_called(tool),
                ],
            )
        ],
    )


def _env() -> dict[str, str]:
    return {"TZ": os.environ.get("CLI_TZ", "Etc/UTC")}


def claude() -> Suite:
    agent = SubprocessAgent.claude_code(
        model="claude-sonnet-4-5",
        executable=os.environ.get("CLI_AGENT", "claude"),
        upstream=os.environ.get("CLI_UPSTREAM"),
        env=_env(),
        timeout=90,
    )
    return _suite(agent, "Write")


def codex() -> Suite:
    upstream = os.environ.get("CLI_UPSTREAM")
    agent = SubprocessAgent.codex(
        model="gpt-5.5",
        executable=os.environ.get("CLI_AGENT", "codex"),
        upstream=f"{upstream}/v1" if upstream else None,
        env=_env(),
        timeout=90,
    )
    return _suite(agent, "apply_patch")
