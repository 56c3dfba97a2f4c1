"""`harness: {agent: claude-code | codex, ...}` in a suite file: the presets, and their problems."""

from __future__ import annotations

from pathlib import Path

from trialkit.harness.subprocess import SubprocessAgent
from trialkit.loaders.suite_file import load_suite_file

from ._files import problems_of, write

TASKS = """
environment: {workspace: fixtures/repo}
tasks:
  - id: a
    input: x
"""


def suite_with(tmp_path: Path, harness: str) -> Path:
    write(tmp_path, {"suite.yaml": f"id: s\nharness: {harness}\n{TASKS}"})
    (tmp_path / "fixtures" / "repo").mkdir(parents=True, exist_ok=True)
    return tmp_path / "suite.yaml"


def test_claude_code_from_a_suite_file_is_the_preset_with_its_options(tmp_path: Path) -> None:
    path = suite_with(
        tmp_path,
        "{agent: claude-code, model: claude-sonnet-4-5, allowed_tools: [Read, Write], "
        "permission_mode: plan, args: [--max-turns, '5'], executable: /opt/claude, "
        "upstream: 'http://127.0.0.1:9', env: {A: b}, timeout: 90}",
    )
    agent = load_suite_file(path).harness
    assert isinstance(agent, SubprocessAgent)
    assert agent.name == "claude-code"
    assert agent.command[:2] == ["/opt/claude", "-p"]
    assert agent.command[7:9] == ["--model", "claude-sonnet-4-5"]
    assert "--permission-mode" in agent.command and "plan" in agent.command
    assert "--allowed-tools=Read,Write" in agent.command
    assert agent.command[-2:] == ["--max-turns", "5"]
    assert agent.env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert agent.env["A"] == "b"
    assert agent.upstreams == {"anthropic": "http://127.0.0.1:9"}
    assert agent.timeout == 90 and agent.home and agent.proxy
    assert agent.continue_args == ["--resume", "{session_id}"]


def test_codex_from_a_suite_file_gets_its_config_and_sandbox(tmp_path: Path) -> None:
    path = suite_with(
        tmp_path, "{agent: codex, model: gpt-5.5, sandbox: read-only, upstream: 'http://x/v1'}"
    )
    agent = load_suite_file(path).harness
    assert isinstance(agent, SubprocessAgent)
    assert agent.command[:4] == ["codex", "exec", "--json", "--skip-git-repo-check"]
    assert agent.command[4:6] == ["-s", "read-only"]
    config = agent.files["config.toml"]
    assert 'model = "gpt-5.5"' in config
    assert 'base_url = "{openai_base_url}"' in config and 'wire_api = "responses"' in config
    assert agent.env["CODEX_HOME"] == "{home}"
    assert agent.upstreams == {"openai": "http://x/v1"}


def test_a_model_harness_is_still_a_model(tmp_path: Path) -> None:
    path = suite_with(tmp_path, "{model: openai/gpt-4o-mini}")
    assert not isinstance(load_suite_file(path).harness, SubprocessAgent)


def test_options_of_the_other_agent_are_problems_with_their_line(tmp_path: Path) -> None:
    suite_with(tmp_path, "{agent: codex, allowed_tools: [Read]}")
    assert problems_of(tmp_path) == [
        "suite.yaml:2: harness: `allowed_tools` is a Claude Code option; codex has no such thing"
    ]
    suite_with(tmp_path, "{agent: claude-code, sandbox: read-only}")
    assert problems_of(tmp_path) == [
        "suite.yaml:2: harness: `sandbox` is a Codex option; Claude Code takes `permission_mode`"
    ]
    suite_with(tmp_path, "{agent: cursor}")
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("suite.yaml:2: harness.agent: ")
    assert "claude-code" in problem and "codex" in problem
    suite_with(tmp_path, "{agent: codex, sandbox: anything}")
    (problem,) = problems_of(tmp_path)
    assert problem.startswith("suite.yaml:2: harness.sandbox: ") and "workspace-write" in problem
