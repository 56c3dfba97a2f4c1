"""`SubprocessAgent.in_sandbox("docker")`: a command-line agent's turns in a container, for real.
Its model calls reach trialkit's model proxy through the bridge at the URL it is given (and are
captured as outside); it sees its workspace and nothing of the host; the files it writes are in
the trial's diff and the host user's again; a limit it hits is a trial error naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.capture.helpers import KEY, errors, run_trials
from tests.fakes.provider_server import ProviderServer
from tests.sandbox._docker import container_provider, image_for
from trialkit import Suite, Task, graders
from trialkit.environments.workspace import Workspace
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.sandbox.base import Limits, NetworkPolicy, SandboxPolicy
from trialkit.score import Verdict

# an agent with nothing but the image's python3: one Messages call through urllib
STDLIB_AGENT = r"""
import json, os, sys, urllib.request
body = {"model": "claude-test", "max_tokens": 64,
        "messages": [{"role": "user", "content": sys.argv[1]}]}
request = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"].rstrip("/") + "/v1/messages",
    data=json.dumps(body).encode(),
    headers={"content-type": "application/json", "anthropic-version": "2023-06-01",
             "x-api-key": os.environ["ANTHROPIC_API_KEY"]})
answer = json.load(urllib.request.urlopen(request, timeout=30))
print(answer["content"][0]["text"])
"""

LOOK = r"""
import json, os, sys
try:
    secret = open(sys.argv[1]).read()
except OSError as exc:
    secret = type(exc).__name__
open("made-inside.txt", "w").write("from the box")
print(json.dumps({"env": sorted(os.environ), "is_sandbox": os.environ.get("IS_SANDBOX"),
                  "secret": secret, "cwd": os.getcwd(), "home": os.environ["HOME"],
                  "uid": os.getuid()}))
"""


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TRIALKIT_TEST_HOST_ONLY", "not for the agent")


def test_the_agents_model_calls_reach_the_proxy_from_the_container(
    provider_server: ProviderServer,
) -> None:
    provider = container_provider()
    if "model-only" not in provider.capabilities().network:
        pytest.skip("model-only needs root here")
    upstream = {"anthropic": provider_server.url, "openai": provider_server.openai_base_url}
    agent = SubprocessAgent(["python3", "-c", STDLIB_AGENT], timeout=60, upstream=upstream)
    agent.in_sandbox("docker", image=image_for("docker"))
    task = Task(id="t", input="Paris", graders=[graders.contains("Paris")])
    report, trials, _ = run_trials(Suite(id="boxed", harness=agent, tasks=[task]))
    assert errors(trials) == []
    assert report.summary.passed_tasks == 1
    (call,) = trials[0].transcript.model_calls
    assert call.endpoint == f"POST {provider_server.url}/v1/messages" and call.status == 200
    assert call.role == "agent" and not call.replayed
    assert {r.api_key for r in provider_server.requests} == {KEY}


def test_the_agent_sees_its_workspace_and_nothing_of_the_host(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    (fixture / "README").write_text("the fixture\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    container_provider()
    agent = SubprocessAgent(["python3", "-c", LOOK, str(secret)], timeout=60)
    policy = SandboxPolicy(
        "docker", NetworkPolicy("none"), NetworkPolicy("none"), image=image_for("docker")
    )
    agent.in_sandbox(policy)
    task = Task(id="look", input="-", graders=[graders.file_exists("made-inside.txt")])
    suite = Suite(id="look", harness=agent, environment=Workspace(fixture), tasks=[task])
    _, trials, _ = run_trials(suite)
    assert errors(trials) == [] and trials[0].verdict == Verdict.PASS
    seen = json.loads(trials[0].outcome.output or "")
    assert seen["secret"] == "FileNotFoundError"
    assert seen["is_sandbox"] == "1"
    assert seen["uid"] != 0
    assert "TRIALKIT_TEST_HOST_ONLY" not in seen["env"]
    assert {"ANTHROPIC_API_KEY", "TRIALKIT_TASK_ID", "TRIALKIT_WORKSPACE"} <= set(seen["env"])
    assert seen["home"] == "/home/trialkit"
    (change,) = trials[0].outcome.diff.files if trials[0].outcome.diff else ()
    assert change.path == "made-inside.txt"


def test_a_limit_the_agent_hits_is_a_trial_error_naming_it() -> None:
    container_provider()
    hog = "x = []\nwhile True: x.append(bytearray(1 << 20)); x[-1][::4096] = b'x' * 256"
    agent = SubprocessAgent(["python3", "-c", hog], timeout=60)
    limits = Limits(memory_bytes=64 << 20)
    agent.in_sandbox(
        SandboxPolicy("docker", NetworkPolicy("none"), limits=limits, image=image_for("docker"))
    )
    task = Task(id="hog", input="-", graders=[graders.contains("never")])
    _, trials, _ = run_trials(Suite(id="hog", harness=agent, tasks=[task]))
    (trial,) = trials
    assert trial.verdict == Verdict.ERROR
    assert trial.error is not None and "memory limit" in trial.error.message
