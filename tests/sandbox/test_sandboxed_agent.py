"""`SubprocessAgent.in_sandbox`: a command-line agent's turns in a bwrap sandbox, for real. Its
model calls reach trialkit's model proxy through the sandbox's bridge (and are captured as
outside); it sees nothing of the host but what the sandbox holds; a limit it hits is a trial
error naming the limit; a policy its provider cannot enforce is refused before any trial;
`IS_SANDBOX` is set only in a sandbox that isolates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.capture.helpers import KEY, errors, run_trials
from tests.fakes.provider_server import ProviderServer
from tests.sandbox._bwrap import bwrap_provider
from trialkit import Suite, Task, graders
from trialkit.environments.workspace import Workspace
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.sandbox.base import Limits, NetworkPolicy, PolicyRefused, SandboxPolicy
from trialkit.score import Verdict

ROOT = Path(__file__).resolve().parents[2]
SDK_AGENT = str(ROOT / "tests" / "harness" / "sdk_agent.py")
# what a Python agent of this checkout needs to run inside: the interpreter, the virtual
# environment and the checkout (source and tests), read-only
PYTHON = [sys.base_prefix, sys.prefix, str(ROOT)]

LOOK = r"""
import json, os, sys
try:
    secret = open(sys.argv[1]).read()
except OSError as exc:
    secret = type(exc).__name__
open("made-inside.txt", "w").write("from the box")
print(json.dumps({"env": sorted(os.environ), "is_sandbox": os.environ.get("IS_SANDBOX"),
                  "secret": secret, "cwd": os.getcwd(), "home": os.environ["HOME"]}))
"""


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TRIALKIT_TEST_HOST_ONLY", "not for the agent")


def test_the_agents_model_calls_reach_the_proxy_through_the_sandbox(
    provider_server: ProviderServer,
) -> None:
    provider = bwrap_provider()
    if "model-only" not in provider.capabilities().network:
        pytest.skip("model-only needs root here")
    upstream = {"anthropic": provider_server.url, "openai": provider_server.openai_base_url}
    agent = SubprocessAgent([sys.executable, SDK_AGENT], timeout=60, upstream=upstream)
    agent.in_sandbox("bwrap", read_only=PYTHON)
    task = Task(id="t", input="anthropic Paris", graders=[graders.contains("Paris")])
    report, trials, _ = run_trials(Suite(id="boxed", harness=agent, tasks=[task]))
    assert errors(trials) == []
    assert report.summary.passed_tasks == 1
    (call,) = trials[0].transcript.model_calls
    assert call.endpoint == f"POST {provider_server.url}/v1/messages" and call.status == 200
    assert call.role == "agent" and not call.replayed
    assert {r.api_key for r in provider_server.requests} == {KEY}


def test_the_agent_sees_its_workspace_and_nothing_of_the_host(tmp_path: Path) -> None:
    bwrap_provider()
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "README").write_text("the fixture\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    agent = SubprocessAgent(["/usr/bin/python3", "-c", LOOK, str(secret)], timeout=60)
    agent.in_sandbox(SandboxPolicy("bwrap", NetworkPolicy("none"), NetworkPolicy("none")))
    task = Task(id="look", input="-", graders=[graders.file_exists("made-inside.txt")])
    suite = Suite(id="look", harness=agent, environment=Workspace(fixture), tasks=[task])
    _, trials, _ = run_trials(suite)
    assert errors(trials) == [] and trials[0].verdict == Verdict.PASS
    seen = json.loads(trials[0].outcome.output or "")
    assert seen["secret"] == "FileNotFoundError"
    assert seen["is_sandbox"] == "1"
    assert "TRIALKIT_TEST_HOST_ONLY" not in seen["env"]
    assert {"ANTHROPIC_API_KEY", "TRIALKIT_TASK_ID", "TRIALKIT_WORKSPACE"} <= set(seen["env"])
    assert seen["home"] == "/home/sandbox"
    (change,) = trials[0].outcome.diff.files if trials[0].outcome.diff else ()
    assert change.path == "made-inside.txt"


def test_a_limit_the_agent_hits_is_a_trial_error_naming_it(tmp_path: Path) -> None:
    provider = bwrap_provider()
    if "memory" not in provider.capabilities().limits:
        pytest.skip("no writable cgroup here: no memory limit to hit")
    hog = "x = []\nwhile True: x.append(bytearray(1 << 20)); x[-1][::4096] = b'x' * 256"
    agent = SubprocessAgent(["/usr/bin/python3", "-c", hog], timeout=60)
    limits = Limits(memory_bytes=64 << 20)
    agent.in_sandbox(SandboxPolicy("bwrap", NetworkPolicy("none"), limits=limits))
    task = Task(id="hog", input="-", graders=[graders.contains("never")])
    _, trials, _ = run_trials(Suite(id="hog", harness=agent, tasks=[task]))
    (trial,) = trials
    assert trial.verdict == Verdict.ERROR
    assert trial.error is not None and "memory limit" in trial.error.message


def test_a_policy_the_provider_cannot_enforce_is_refused_at_once() -> None:
    agent = SubprocessAgent(["true"])
    with pytest.raises(PolicyRefused, match="sandbox 'local' cannot enforce network 'none'"):
        agent.in_sandbox(SandboxPolicy("local", NetworkPolicy("none"), NetworkPolicy("host")))
    assert agent.sandbox_policy is None


def test_is_sandbox_is_never_claimed_outside_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IS_SANDBOX", raising=False)  # this machine may set it itself
    claude = SubprocessAgent.claude_code(permission_mode="bypassPermissions")
    assert "IS_SANDBOX" not in claude.env
    local = SubprocessAgent(["/usr/bin/python3", "-c", LOOK, "/nonexistent"], timeout=60)
    local.in_sandbox("local")
    task = Task(id="look", input="-", graders=[graders.contains("is_sandbox")])
    _, trials, _ = run_trials(Suite(id="local", harness=local, tasks=[task]))
    assert errors(trials) == []
    seen = json.loads(trials[0].outcome.output or "")
    assert seen["is_sandbox"] is None  # local isolates nothing: no claim
    assert "TRIALKIT_TEST_HOST_ONLY" in seen["env"]  # and hides nothing, as before


def test_the_agent_calls_served_tools_over_mcp_from_the_sandbox(tmp_path: Path) -> None:
    provider = bwrap_provider()
    if "model-only" not in provider.capabilities().network:
        pytest.skip("model-only needs root here")
    from tests.harness.test_mcp import FAKE, read_note, write_note

    agent = SubprocessAgent(
        [sys.executable, FAKE, "--output-format", "stream-json", "--mcp-config", "{mcp_config}"],
        tools=[write_note, read_note],
        timeout=60,
    ).in_sandbox("bwrap", read_only=PYTHON)
    script = 'mcp write_note {"path": "notes/a.md", "text": "boxed"}\nenv'
    task = Task(
        id="notes",
        input=script,
        graders=[graders.tool_called("write_note", {"path": "notes/a.md"})],
    )
    suite = Suite(id="s", harness=agent, environment=Workspace(tmp_path), tasks=[task])
    _, trials, _ = run_trials(suite)
    assert errors(trials) == [] and trials[0].verdict == Verdict.PASS
    told = json.loads(trials[0].outcome.output or "")
    assert told["argv"][told["argv"].index("--mcp-config") + 1] == "/tmp/trialkit-mcp.json"
    (change,) = trials[0].outcome.diff.files if trials[0].outcome.diff else ()
    assert change.path == "notes/a.md"
