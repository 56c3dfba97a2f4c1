"""Record the cassette of suite.py again.

    python examples/sandbox/record.py          # against the fake provider of this repository
    python examples/sandbox/record.py --live   # against Anthropic, with ANTHROPIC_API_KEY

Both need Claude Code 2.1.197 (`npm install -g @anthropic-ai/claude-code@2.1.197`, or `CLAUDE`
naming the program) and bubblewrap. By default Claude Code talks, through trialkit's model
proxy and the sandbox's bridge, to the fake provider of `tests/fakes/provider_server.py` on
127.0.0.1 (so run this from a checkout of trialkit): a stand-in for the model that answers
from the request alone, as a careful model would: it reads stats.py, edits the bug by the
file's absolute path, then says what it did. `--live` sends the calls to Anthropic (or to
`ANTHROPIC_BASE_URL`) instead.

The old cassette is removed first, so no recording that is no longer used stays behind; the
new one is checked with `trialkit cache verify`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASSETTE = HERE / "cassette"
BUG = {"old_string": "sum(values) / (len(values) + 1)", "new_string": "sum(values) / len(values)"}


def record(env: dict[str, str]) -> int:
    shutil.rmtree(CASSETTE, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:  # the run's store: nothing to keep
        trialkit = [sys.executable, "-m", "trialkit"]
        run = [*trialkit, "run", f"{HERE / 'suite.py'}:suite", "--cache", str(CASSETTE)]
        run += ["--cache-mode", "record", "--store", str(Path(scratch) / "store.db")]
        code = subprocess.run(run, env=env, check=False).returncode
    verified = subprocess.run([*trialkit, "cache", "verify", str(CASSETTE)], check=False)
    return code or verified.returncode


def fake_provider() -> Any:
    """The fake provider, answering as a model fixing the bug would (see the module's text)."""
    sys.path.insert(0, str(HERE.parents[1]))  # the repository's root, for tests.fakes
    from tests.fakes.coding_model import working_directory
    from tests.fakes.provider_server import ProviderServer, Reply, ToolUse
    from tests.fakes.provider_wire import Api, digest, tool_results

    @dataclasses.dataclass(frozen=True)
    class BugFixer:
        delay: float = 0.0

        def reply_to(self, api: Api, request: dict[str, Any]) -> Reply:
            folder = working_directory(api, request)
            done = len(tool_results(api, request))
            if folder is None:
                return Reply("I cannot tell which folder I am working in.")
            path = f"{folder}/stats.py"
            if done == 0:
                call = ToolUse("Read", {"file_path": path}, id="toolu_" + digest("read"))
                return Reply("I'll read stats.py first.", tool_calls=[call])
            if done == 1:
                change = {"file_path": path, **BUG}
                return Reply(tool_calls=[ToolUse("Edit", change, id="toolu_" + digest("edit"))])
            return Reply("Fixed mean(): it divided by one more than the number of values.")

    return ProviderServer(default=BugFixer())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python examples/sandbox/record.py")
    parser.add_argument("--live", action="store_true", help="send the calls to Anthropic")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.live:
        sys.exit(record(env))
    with fake_provider() as server:
        env["ANTHROPIC_BASE_URL"] = server.anthropic_base_url  # the proxy's upstream
        env["ANTHROPIC_API_KEY"] = "placeholder-the-fake-takes-any-key"
        sys.exit(record(env))


if __name__ == "__main__":
    main()
