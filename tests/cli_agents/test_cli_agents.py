"""Claude Code and Codex, the real CLIs from npm, recorded and replayed through the model proxy.

Each runs `scenario.py` in a network namespace with only a loopback interface: a file-editing
task in a `Workspace`, 3 trials, recorded against a fake provider that writes the file by
absolute path; the provider stops; the run replays `--offline` in fresh workspaces with the
agent's date a day away, against a provider that listens and must hear nothing; a changed
prompt is a strict miss. Then everything the runs left is searched for the API keys.

Each agent runs so three times: on the host (`none`), and with `trialkit run --sandbox bwrap`
and `--sandbox docker` (the preset's installation, npm's `node_modules` and Codex's `node`,
bound in read-only; docker's image from `TRIALKIT_TEST_DOCKER_IMAGE`); in a sandbox the
verdicts and diffs must be those of the run on the host. A missing `bwrap` or Docker daemon
skips its runs, unless `TRIALKIT_REQUIRE_BWRAP=1` or `TRIALKIT_REQUIRE_DOCKER=1` (`.ci/run`
sets both), which fails them instead.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.cli_agents.conftest import find_cli, loopback_namespace
from tests.cli_agents.scenario import KEYS
from tests.sandbox._bwrap import bwrap_provider
from tests.sandbox._docker import container_provider
from trialkit.store.store import Store
from trialkit.trial import Trial

AGENTS = {"claude": ("Write", "claude-code"), "codex": ("apply_patch", "codex")}
SANDBOXES = ("none", "bwrap", "docker")
WORKSPACE = re.compile(re.escape(tempfile.gettempdir()) + r"/trialkit-[A-Za-z0-9_]+")


class Scenario:
    def __init__(self, agent: str, sandbox: str, out: Path) -> None:
        self.agent = agent
        self.sandbox = sandbox
        self.out = out
        self.summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
        store = Store.open(str(out / "store.db"))
        try:
            self.trials = {
                phase: sorted(store.iter_trials(store.resolve_run(phase)), key=lambda t: t.index)
                for phase in ("record", "replay", "changed")
            }
        finally:
            store.close()


_RAN: dict[tuple[str, str], Scenario] = {}


def run_scenario(
    agent: str, sandbox: str, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Scenario:
    """The scenario of `agent` in `sandbox`, run once per session."""
    if (agent, sandbox) in _RAN:
        return _RAN[agent, sandbox]
    env = dict(os.environ)
    if sandbox == "bwrap":
        bwrap_provider()  # a skip, or a failure under TRIALKIT_REQUIRE_BWRAP=1
    elif sandbox == "docker":
        env["TRIALKIT_SANDBOX_IMAGE"] = container_provider("docker").options["image"]
    program = find_cli(agent)
    prefix = loopback_namespace()
    out = tmp_path_factory.mktemp(f"cli-{agent}-{sandbox}")
    command = [*prefix, sys.executable, "-m", "tests.cli_agents.scenario", agent, program]
    command += [str(out), *([sandbox] if sandbox != "none" else [])]
    done = subprocess.run(
        command,
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, (
        f"the scenario failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    _RAN[agent, sandbox] = Scenario(agent, sandbox, out)
    return _RAN[agent, sandbox]


@pytest.fixture(
    scope="module",
    params=list(itertools.product(sorted(AGENTS), SANDBOXES)),
    ids=lambda pair: "-".join(pair),
)
def scenario(
    request: pytest.FixtureRequest, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Scenario:
    agent, sandbox = request.param
    return run_scenario(agent, sandbox, repo_root, tmp_path_factory)


def view(trial: Trial) -> dict[str, Any]:
    """What a replay must give back as it was recorded (the workspace path left out)."""
    transcript = trial.transcript
    return {
        "verdict": trial.verdict,
        "output": trial.outcome.output,
        "diff": [f.model_dump() for f in trial.outcome.diff.files] if trial.outcome.diff else None,
        "scores": [(s.name, s.verdict) for s in trial.scores],
        "tool_calls": [
            (c.name, WORKSPACE.sub("{ws}", json.dumps(c.arguments)), c.is_error)
            for c in transcript.tool_calls
        ],
        "messages": [(m.role, WORKSPACE.sub("{ws}", m.content)) for m in transcript.messages],
        "calls": [(c.model, c.key, c.status, c.usage, c.cost_usd) for c in transcript.model_calls],
        "usage": trial.usage,
        "cost": trial.cost_usd,
    }


def test_a_recorded_run_replays_the_same_in_new_workspaces_on_another_day(
    scenario: Scenario,
) -> None:
    summary, trials = scenario.summary, scenario.trials
    tool, _ = AGENTS[scenario.agent]
    assert summary["record"]["exit"] == 0, summary["record"]
    assert summary["replay"]["exit"] == 0, summary["replay"]
    recorded, replayed = trials["record"], trials["replay"]
    assert [t.verdict for t in recorded] == ["pass"] * 3
    for before, after in zip(recorded, replayed, strict=True):
        assert view(after) == view(before)
        assert [c.replayed for c in after.transcript.model_calls] == [True, True]
        assert [c.replayed for c in before.transcript.model_calls] == [False, False]
        # the file was written into the replaying trial's own workspace, by absolute path
        assert before.outcome.diff is not None and after.outcome.diff is not None
        assert [f.path for f in after.outcome.diff.files] == ["hello.txt"]
        assert [c.name for c in after.transcript.tool_calls] == [tool]


def test_replay_sends_nothing_upstream(scenario: Scenario) -> None:
    assert scenario.summary["record_requests"] == 6  # 3 trials, 2 model turns each
    assert scenario.summary["replay_connections"] == 0


def test_a_changed_prompt_is_a_strict_miss_naming_the_task(scenario: Scenario) -> None:
    changed = scenario.summary["changed"]
    assert changed["exit"] == 3, changed  # more trials errored than allowed
    for trial in scenario.trials["changed"]:
        assert trial.verdict == "error"
        assert trial.error is not None
        assert "replay found no recording for task 'write-hello'" in trial.error.message


def test_usage_and_cost_come_from_the_captured_calls_once(scenario: Scenario) -> None:
    for trial in scenario.trials["record"]:
        calls = trial.transcript.model_calls
        assert len(calls) == 2 and all(c.endpoint and c.endpoint.startswith("POST ") for c in calls)
        summed = calls[0].usage + calls[1].usage
        assert trial.usage == summed
        assert trial.cost_usd == pytest.approx(sum(c.cost_usd or 0 for c in calls))
        (turn,) = trial.transcript.turns
        assert turn.cost_usd is None  # the agent's own figure is not counted...
        assert turn.reported_usage is not None  # ...but kept beside the captured one
        assert turn.reported_usage.output_tokens == summed.output_tokens
        assert len(trial.transcript.tool_calls) == 1  # seen by the proxy, not again from stdout


def test_no_key_is_written_anywhere(scenario: Scenario) -> None:
    assert scenario.summary["keys_upstream"] == 6  # the agent's key did reach the provider
    secrets = [key.encode() for key in KEYS.values()] + [b"trialkitSECRET"]
    written = [p for p in scenario.out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" and "cassette" in p.parts for p in written)
    assert {"report.json", "report.xml", "report.html", "trace.jsonl", "trials.jsonl"} <= {
        p.name for p in written
    }
    leaks = [str(p) for p in written for s in secrets if s in p.read_bytes()]
    assert leaks == []


@pytest.mark.parametrize(
    ("agent", "sandbox"),
    list(itertools.product(sorted(AGENTS), SANDBOXES[1:])),
    ids=lambda value: str(value),
)
def test_in_a_sandbox_the_verdicts_and_diffs_are_those_on_the_host(
    agent: str, sandbox: str, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    boxed = run_scenario(agent, sandbox, repo_root, tmp_path_factory)
    host = run_scenario(agent, "none", repo_root, tmp_path_factory)
    for phase in ("record", "replay", "changed"):
        inside, outside = boxed.trials[phase], host.trials[phase]
        assert len(inside) == len(outside) == 3
        # each trial records the sandbox that ran it; on the host, none that isolates
        assert {(t.sandbox.provider, t.sandbox.isolated) for t in inside if t.sandbox} == {
            (sandbox, True)
        }
        assert all(t.sandbox is not None for t in inside)
        assert all(t.sandbox is None or not t.sandbox.isolated for t in outside)
        # the output of a strict miss names its port and key, which differ; not the verdicts
        keys = ("verdict", "diff", "scores") + (("output",) if phase != "changed" else ())
        for key in keys:
            assert [view(t)[key] for t in inside] == [view(t)[key] for t in outside], (phase, key)
    for phase in ("record", "replay", "changed"):
        assert boxed.summary[phase]["exit"] == host.summary[phase]["exit"], phase
