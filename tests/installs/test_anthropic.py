"""`pip install 'trialkit[anthropic]'` alone: `trialkit run --model anthropic/...` through the
official SDK against a fake Anthropic server on loopback, and an agent on its own SDK client,
whose calls trialkit captures into the transcript."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes.provider_server import ProviderServer
from tests.installs.helpers import said, trialkit
from trialkit import GradeContext, Suite, Task, graders, run_sync

INSTALL = "anthropic"

SUITE = """
id: capitals
trials: 2
tasks:
  - {id: france, input: "Paris, please", graders: [{contains: paris}]}
  - {id: spain, input: "Madrid, please", graders: [{contains: madrid}]}
"""


def test_a_run_of_an_anthropic_model_goes_through_the_sdk(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(SUITE, encoding="utf-8")
    with ProviderServer() as server:  # answers with the last user message
        env = {"ANTHROPIC_BASE_URL": server.anthropic_base_url, "ANTHROPIC_API_KEY": "sk-ant-t"}
        done = trialkit(
            "run", "suite.yaml", "--model", "anthropic/claude-sonnet-4-5",
            "--json", "report.json", cwd=tmp_path, env=env,
        )  # fmt: skip
        sent = server.requests
    assert done.returncode == 0, said(done)
    assert len(sent) == 4 and {r.api for r in sent} == {"messages"}
    assert {r.json["model"] for r in sent} == {"claude-sonnet-4-5"}
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["passed_tasks"] == 2 and report["summary"]["errors"] == 0


def test_an_agent_on_its_own_sdk_client_is_captured() -> None:
    from anthropic import Anthropic

    seen: list[Any] = []

    def calls_seen(ctx: GradeContext) -> bool:
        seen.extend(ctx.transcript.model_calls)
        return True

    with ProviderServer() as server:
        base_url = server.anthropic_base_url
        client = Anthropic(base_url=server.anthropic_base_url, api_key="sk-ant-t", max_retries=0)
        with client:

            def agent(prompt: str) -> str:
                answer = client.messages.create(
                    model="claude-sonnet-4-5",
                    max_tokens=100,
                    messages=[{"role": "user", "content": prompt}],
                )
                return "".join(b.text for b in answer.content if b.type == "text")

            task = Task(id="t", input="Paris", graders=[graders.contains("paris"), calls_seen])
            report = run_sync(Suite(id="sdk", harness=agent, tasks=[task]))
    assert report.summary.pass_rate == 1.0, report.tasks[0].results[0].scores
    (call,) = seen
    assert call.endpoint == f"POST {base_url}/v1/messages"
    assert call.status == 200 and call.usage.input_tokens
