"""No secret leaves trialkit (DESIGN §4), end to end: a provider that echoes the API key in its
error body, through the real openai and anthropic SDKs and `trialkit` as a subprocess; the key
must be in none of the store, the reports, the export, the trace, stdout or stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.provider_server import Fail, ProviderServer

pytestmark = pytest.mark.e2e

ECHOED = (
    "Incorrect API key provided: {api_key}. You can find your key at example.test/keys "
    "(you sent authorization: {authorization})"
)

SUITE_FROM_ENV = """
from trialkit import Suite, Task
suite = Suite(id="leaky", trials=2, tasks=[Task(id="hello", input="Say hello")])
"""

SUITE_WITH_KEY = """
from trialkit import Suite, Task
from trialkit.models import get_model
model = get_model({model!r}, base_url={base_url!r}, api_key={key!r})
suite = Suite(id="leaky", trials=2, tasks=[Task(id="hello", input="Say hello", model=model)])
"""

SUITE_WITH_CLIENT = """
from anthropic import AsyncAnthropic
from trialkit import Suite, Task
from trialkit.models import get_model
from trialkit.models.anthropic import AnthropicModel
client = AsyncAnthropic(auth_token={key!r}, base_url={base_url!r}, max_retries=0)
model = get_model(AnthropicModel("claude-sonnet-4-5", client=client))
suite = Suite(id="leaky", trials=2, tasks=[Task(id="hello", input="Say hello", model=model)])
"""


@dataclass(frozen=True)
class Case:
    id: str
    wire: str  # "openai" or "anthropic"
    status: int
    key_variable: str | None
    """The environment variable holding the key; `None`: the suite passes it in code."""
    suite: str = SUITE_FROM_ENV
    key: str = "sk-proj-Leaky0123456789abcdefSECRET"


CASES = [
    Case("openai-env-401", "openai", 401, "OPENAI_API_KEY"),
    Case("openai-env-400", "openai", 400, "OPENAI_API_KEY", key="k3y-that-looks-like-nothing"),
    Case("anthropic-env-401", "anthropic", 401, "ANTHROPIC_API_KEY", key="sk-ant-api03-Leaky-9876"),
    Case("anthropic-env-400", "anthropic", 400, "ANTHROPIC_API_KEY", key="tok_Leaky_42_xyz"),
    Case("openai-api-key-arg", "openai", 401, None, SUITE_WITH_KEY, key="plain-key-in-code-0042"),
    Case(
        "anthropic-api-key-arg", "anthropic", 400, None, SUITE_WITH_KEY, key="an0ther-key-in-code"
    ),
    Case("anthropic-client", "anthropic", 401, None, SUITE_WITH_CLIENT, key="bearer-only-token-77"),
]

CREDENTIAL_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Left out of the environment the commands get: each case sets the one it tests, if any."""


def _env(work: Path, case: Case, server: ProviderServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_VARIABLES}
    env |= {"TRIALKIT_STORE": str(work / "store.db"), "NO_COLOR": "1", "COLUMNS": "200"}
    if case.key_variable is not None:
        env[case.key_variable] = case.key
        if case.wire == "openai":
            env |= {"OPENAI_BASE_URL": server.openai_base_url, "TRIALKIT_MODEL": "openai/gpt-4o"}
        else:
            env |= {
                "ANTHROPIC_BASE_URL": server.anthropic_base_url,
                "TRIALKIT_MODEL": "anthropic/claude-sonnet-4-5",
            }
    return env


def _suite(case: Case, server: ProviderServer) -> str:
    if case.key_variable is not None:
        return case.suite
    if case.wire == "openai":
        model, base_url = "openai/gpt-4o", server.openai_base_url
    else:
        model, base_url = "anthropic/claude-sonnet-4-5", server.anthropic_base_url
    return case.suite.format(model=model, base_url=base_url, key=case.key)


def _trialkit(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trialkit", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_an_echoed_key_is_redacted_everywhere(tmp_path: Path, case: Case) -> None:
    with ProviderServer(default=Fail(case.status, ECHOED)) as server:
        (tmp_path / "suite.py").write_text(_suite(case, server))
        env = _env(tmp_path, case, server)
        run = _trialkit(
            tmp_path,
            env,
            "run",
            "suite.py",
            "--no-progress",
            "--trace-jsonl",
            "trace.jsonl",
            "--include-content",
            "--json",
            "run.json",
            "--html",
            "run.html",
            "--markdown",
            "run.md",
            "--junit",
            "run.xml",
        )
        # The provider did get the key, and sent it back: there is something to leak.
        assert server.request_count >= 2
        assert all(case.key in " ".join(r.headers.values()) for r in server.requests)
    assert run.returncode == 3, run.stdout + run.stderr

    outputs: dict[str, str] = {"run stdout": run.stdout, "run stderr": run.stderr}
    run_id = json.loads((tmp_path / "run.json").read_text())["run"]["id"]
    for fmt in ("table", "json", "md", "html", "junit"):
        report = _trialkit(tmp_path, env, "report", run_id, "--format", fmt)
        assert report.returncode == 0, report.stderr
        outputs[f"report --format {fmt}"] = report.stdout + report.stderr
    export = _trialkit(tmp_path, env, "export", run_id, "--to", "jsonl", "--include-content")
    assert export.returncode == 0, export.stderr
    outputs["export --to jsonl"] = export.stdout + export.stderr
    shown = _trialkit(tmp_path, env, "transcripts", "show", f"{run_id}/hello#0", "--json")
    assert shown.returncode == 0, shown.stderr
    outputs["transcripts show --json"] = shown.stdout + shown.stderr
    full = _trialkit(tmp_path, env, "transcripts", "show", f"{run_id}/hello#1", "--full")
    assert full.returncode == 0, full.stderr
    outputs["transcripts show --full"] = full.stdout + full.stderr

    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "suite.py"]
    assert {"store.db", "trace.jsonl", "run.json", "run.html", "run.md", "run.xml"} <= {
        p.name for p in files
    }
    leaks = [where for where, text in outputs.items() if case.key in text]
    leaks += [
        str(path.relative_to(tmp_path))
        for path in files
        if case.key.encode() in path.read_bytes()
        or json.dumps(case.key).encode() in path.read_bytes()
    ]
    assert leaks == []
    # The errors are there, with the provider's words, only without the key.
    assert "Incorrect API key provided: [REDACTED]" in run.stdout
    assert "Incorrect API key provided: [REDACTED]" in outputs["report --format json"]
