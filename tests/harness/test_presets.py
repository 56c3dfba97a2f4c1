"""`SubprocessAgent.claude_code()` and `.codex()`: what each sets up, what each refuses, and the
error that says how to install an agent that is missing."""

from __future__ import annotations

import pytest

from tests.capture.helpers import run_trials
from trialkit import Suite, Task
from trialkit.harness.subprocess import SubprocessAgent


def test_claude_code_runs_unattended_and_talks_only_to_the_proxy() -> None:
    agent = SubprocessAgent.claude_code(model="claude-opus-4-8", allowed_tools=["Read"])
    assert agent.command == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--model",
        "claude-opus-4-8",
        "--allowed-tools=Read",
    ]
    assert agent.stdin and agent.home and agent.proxy and agent.output == "stream-json"
    assert agent.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert agent.env["DISABLE_TELEMETRY"] == "1"
    assert agent.env["TZ"] == "Etc/UTC"
    assert agent.continue_args == ["--resume", "{session_id}"]


def test_served_tools_are_allowed_and_configured(tmp_path: object) -> None:
    pytest.importorskip("mcp")

    def note(text: str) -> str:
        """Keep a note."""
        return text

    agent = SubprocessAgent.claude_code(allowed_tools=["Read"], tools=[note])
    assert "--allowed-tools=Read,mcp__trialkit" in agent.command
    assert agent.command[agent.command.index("--mcp-config") + 1] == "{mcp_config}"
    codex = SubprocessAgent.codex(tools=[note])
    assert '[mcp_servers.trialkit]\nurl = "{mcp_url}"' in codex.files["config.toml"]


def test_codex_gets_a_provider_config_in_its_own_home() -> None:
    agent = SubprocessAgent.codex(model="gpt-5.5", upstream="http://127.0.0.1:9/v1")
    assert agent.command[:4] == ["codex", "exec", "--json", "--skip-git-repo-check"]
    assert agent.command[4:] == ["-s", "workspace-write"]
    config = agent.files["config.toml"]
    for line in (
        'model = "gpt-5.5"',
        'model_provider = "trialkit"',
        'base_url = "{openai_base_url}"',
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
        "plugins = false",
        "enabled = false",
    ):
        assert line in config.splitlines()
    assert agent.env["CODEX_HOME"] == "{home}" and not agent.stdin
    assert agent.upstreams == {"openai": "http://127.0.0.1:9/v1"}
    assert agent.continue_args == ["resume", "{session_id}"]
    assert "mcp_servers" not in config


def test_a_user_env_wins_over_the_presets() -> None:
    agent = SubprocessAgent.claude_code(env={"TZ": "Europe/Paris", "SHELL": "/bin/zsh"})
    assert (agent.env["TZ"], agent.env["SHELL"]) == ("Europe/Paris", "/bin/zsh")


def test_unknown_modes_are_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="permission_mode: one of acceptEdits"):
        SubprocessAgent.claude_code(permission_mode="yolo")
    with pytest.raises(ValueError, match="sandbox: one of read-only, workspace-write"):
        SubprocessAgent.codex(sandbox="none")


@pytest.mark.parametrize(
    ("preset", "install"),
    [
        (SubprocessAgent.claude_code, "npm install -g @anthropic-ai/claude-code"),
        (SubprocessAgent.codex, "npm install -g @openai/codex"),
    ],
)
def test_a_missing_agent_is_an_error_saying_how_to_install_it(preset: object, install: str) -> None:
    name = "claude" if "claude" in install else "codex"
    agent = preset(executable=f"/nowhere/{name}")  # type: ignore[operator]
    suite = Suite(id="missing", harness=agent, tasks=[Task(id="t", input="hi")])
    _, (trial,), _ = run_trials(suite)
    assert trial.verdict == "error" and trial.error is not None
    assert trial.error.type == "AgentStartError"
    assert install in trial.error.message
