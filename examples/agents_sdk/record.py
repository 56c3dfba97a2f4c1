"""Record the cassette of evals.py again.

    python examples/agents_sdk/record.py          # against the fake provider of this repository
    python examples/agents_sdk/record.py --live   # against the server the environment names

By default the agent talks to the fake provider of `tests/fakes/provider_server.py` on
127.0.0.1 (so run this from a checkout of trialkit): a stand-in for OpenAI that answers from
the request alone, so recording twice gives the same answers. It asks for the tool the agent
offers, with the city the question names, then answers with what the tool returned. `--live`
keeps the environment as it is: `OPENAI_API_KEY`, and `OPENAI_BASE_URL` for another
OpenAI-compatible server (with `WEATHER_AGENT_MODEL` naming its model).

The old cassette is removed first, so no recording that is no longer used stays behind; the
new one is checked with `trialkit cache verify`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASSETTE = HERE / "cassette"


def record(env: dict[str, str]) -> int:
    shutil.rmtree(CASSETTE, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:  # the run's store: nothing to keep
        trialkit = [sys.executable, "-m", "trialkit"]
        run = [*trialkit, "run", str(HERE / "evals.py"), "--cache", str(CASSETTE)]
        run += ["--cache-mode", "record", "--store", str(Path(scratch) / "store.db")]
        code = subprocess.run(run, env=env, check=False).returncode
    verified = subprocess.run([*trialkit, "cache", "verify", str(CASSETTE)], check=False)
    return code or verified.returncode


def fake_provider() -> Any:
    """The fake provider, answering as a forecasting model would (see the module's text)."""
    sys.path.insert(0, str(HERE.parents[1]))  # the repository's root, for tests.fakes
    from tests.fakes.provider_server import ProviderServer, Reply, RoundTrip
    from tests.fakes.provider_wire import Api, last_user_text

    @dataclasses.dataclass(frozen=True)
    class Forecaster(RoundTrip):
        """The fake's tool round trip, with the city the question names as the tool's
        argument (as a model picks it out) instead of the whole question."""

        def reply_to(self, api: Api, request: dict[str, Any]) -> Reply:
            reply = super().reply_to(api, request)
            named = re.search(r"\b(?:in|on|for) ([A-Z]\w+)", last_user_text(api, request))
            if not reply.tool_calls or named is None:
                return reply
            calls = [
                dataclasses.replace(call, arguments={"city": named.group(1)})
                for call in reply.tool_calls
            ]
            return dataclasses.replace(reply, tool_calls=calls)

    return ProviderServer(default=Forecaster(answer="The forecast service says"))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python examples/agents_sdk/record.py")
    parser.add_argument(
        "--live", action="store_true", help="use OPENAI_API_KEY and OPENAI_BASE_URL as they are"
    )
    args = parser.parse_args()
    env = dict(os.environ)
    if args.live:
        sys.exit(record(env))
    with fake_provider() as server:
        env["OPENAI_BASE_URL"] = server.openai_base_url
        env["OPENAI_API_KEY"] = "placeholder-the-fake-takes-any-key"
        env.pop("WEATHER_AGENT_MODEL", None)  # the cassette is of the default model
        sys.exit(record(env))


if __name__ == "__main__":
    main()
