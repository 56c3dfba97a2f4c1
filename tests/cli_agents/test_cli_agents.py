"""Claude Code and Codex, the real CLIs from npm, recorded and replayed through the model proxy.

Each runs `scenario.py` in a network namespace with only a loopback interface: a file-editing
task in a `Workspace`, 3 trials, recorded against a fake provider that writes the file by
absolute path; the provider stops; the run replays `--offline` in fresh workspaces with the
agent's date a day away, against a provider that listens and must hear nothing; a changed
prompt is a strict miss. Then everything the runs left is searched for the API keys.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.cli_agents.conftest import find_cli, loopback_namespace
from tests.cli_agents.scenario import KEYS
from trialkit.store.store import Store
from trialkit.trial import Trial

AGENTS = {"claude": ("Write", "claude-code"), "codex": ("apply_patch", "codex")}
WORKSPACE = re.compile(re.escape(tempfile.gettempdir()) + r"/trialkit-[A-Za-z0-9_]+")


class Scenario:
    def __init__(self, agent: str, out: Path) -> None:
        self.agent = agent
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


@pytest.fixture(scope="module", params=sorted(AGENTS))
def scenario(
    request: pytest.FixtureRequest, repo_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Scenario:
    agent = request.param
    program = find_cli(agent)
    prefix = loopback_namespace()
    out = tmp_path_factory.mktemp(f"cli-{agent}")
    command = [*prefix, sys.executable, "-m", "tests.cli_agents.scenario", agent, program]
    done = subprocess.run(
        [*command, str(out)],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert done.returncode == 0, (
        f"the scenario failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return Scenario(agent, out)


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
