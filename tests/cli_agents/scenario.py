"""One command-line agent, recorded and replayed through trialkit's CLI, with a fake provider:
what `test_cli_agents.py` runs inside a network namespace that has only a loopback interface.

    python -m tests.cli_agents.scenario claude|codex PROGRAM OUT_FOLDER [SANDBOX]

With SANDBOX (bwrap, docker), every phase runs `trialkit run --sandbox SANDBOX`: the agent's
turns run in that provider's sandbox (docker's image from `TRIALKIT_SANDBOX_IMAGE`).

1. record: `trialkit run` against the fake provider (`WritesFile`: a file written by absolute
   path, as models do), 3 trials, with distinctive fake API keys in the environment and the
   agent in one time zone;
2. the provider stops; replay, `--offline`, in fresh workspaces, the agent in a time zone 26
   hours away (another day's date), against a new provider that counts its connections;
3. replay with a changed prompt: a strict miss.

Everything each phase left (exit code, output, the run exported as JSON Lines, reports,
cassettes, store) is kept in OUT_FOLDER; `summary.json` there says what the test checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.coding_model import WritesFile
from tests.fakes.provider_server import ProviderServer

KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-trialkitSECRETclaude0123456789abcdef",
    "OPENAI_API_KEY": "sk-proj-trialkitSECRETcodex0123456789abcdef",
}
RECORD_TZ, REPLAY_TZ = "Etc/GMT+12", "Etc/GMT-14"  # 26 hours apart: never the same date


SANDBOX: list[str] = []
"""`--sandbox SANDBOX` for every phase, when the scenario was given one."""


def trialkit(out: Path, phase: str, suite: str, env: dict[str, str], *extra: str) -> dict:
    reports = out / phase
    reports.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "trialkit", "run", suite, "--name", phase]
    command += ["--cache", str(out / "cassette"), "--store", str(out / "store.db")]
    command += ["--json", str(reports / "report.json"), "--junit", str(reports / "report.xml")]
    command += ["--html", str(reports / "report.html"), "--markdown", str(reports / "report.md")]
    command += ["--trace-jsonl", str(reports / "trace.jsonl"), "--include-content"]
    command += ["--no-progress", "--concurrency", "2", *SANDBOX, *extra]
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    export = [sys.executable, "-m", "trialkit", "export", phase, "--to", "jsonl"]
    export += ["--include-content", "--store", str(out / "store.db")]
    exported = subprocess.run(
        [*export, "-o", str(reports / "trials.jsonl")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return {
        "exit": done.returncode,
        "stdout": done.stdout[-4000:],
        "stderr": done.stderr[-4000:],
        "export_exit": exported.returncode,
        "export_stderr": exported.stderr[-2000:],
    }


def main() -> None:
    agent, program, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if len(sys.argv) > 4:
        SANDBOX[:] = ["--sandbox", sys.argv[4]]
    out.mkdir(parents=True, exist_ok=True)
    suite = f"{Path(__file__).with_name('suites.py')}:{agent}"
    base = {k: v for k, v in os.environ.items() if k not in KEYS and not k.endswith("_BASE_URL")}
    base.update(CLI_AGENT=program, TRIALKIT_CACHE_MODE="", PYTHONUNBUFFERED="1")
    summary: dict = {"agent": agent, "sandbox": sys.argv[4] if len(sys.argv) > 4 else None}
    with ProviderServer(default=WritesFile()) as provider:
        env = {**base, **KEYS, "CLI_UPSTREAM": provider.url, "CLI_TZ": RECORD_TZ}
        summary["record"] = trialkit(out, "record", suite, env, "--cache-mode", "record")
        summary["record_requests"] = len(provider.requests)
        # how many requests reached the provider with the agent's key (not the key itself)
        summary["keys_upstream"] = sum(r.api_key in KEYS.values() for r in provider.requests)
    with ProviderServer(default=WritesFile()) as idle:  # listening, and must hear nothing
        env = {**base, "CLI_UPSTREAM": idle.url, "CLI_TZ": REPLAY_TZ}
        summary["replay"] = trialkit(
            out, "replay", suite, env, "--cache-mode", "replay", "--offline"
        )
        changed = {**env, "CLI_PROMPT": "Create bye.txt in the working folder with the text bye."}
        summary["changed"] = trialkit(
            out, "changed", suite, changed, "--cache-mode", "replay", "--offline"
        )
        summary["replay_connections"] = idle.connections
    (out / "summary.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
