"""Where the real command-line agents are, and a network namespace with only a loopback
interface to run them in (a request that bypasses trialkit's proxy then fails loudly).

`.ci/run` installs the pinned CLIs from npm and sets `TRIALKIT_TEST_CLI_BIN` to their folder
and `TRIALKIT_REQUIRE_CLI_AGENTS=1`, which turns every skip here into a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PINNED = {
    "claude": "@anthropic-ai/claude-code@2.1.197",  # 2.1.198 and later need Node 22
    "codex": "@openai/codex@0.171.0",
}
INSTALL = (
    "npm install --prefix .cli " + " ".join(PINNED.values()) + " and set "
    "TRIALKIT_TEST_CLI_BIN=.cli/node_modules/.bin (.ci/run does)"
)


def _missing(reason: str) -> None:
    if os.environ.get("TRIALKIT_REQUIRE_CLI_AGENTS") == "1":
        pytest.fail(f"{reason}, and TRIALKIT_REQUIRE_CLI_AGENTS=1 requires it")
    pytest.skip(reason)


def find_cli(name: str) -> str:
    """The program `name` (claude, codex): from TRIALKIT_TEST_CLI_BIN, else PATH."""
    folder = os.environ.get("TRIALKIT_TEST_CLI_BIN")
    found = shutil.which(name, path=folder) if folder else shutil.which(name)
    if found is None:
        _missing(f"{name} ({PINNED[name]}) is not installed: {INSTALL}")
    assert found is not None
    return found


def loopback_namespace() -> list[str]:
    """The command prefix that runs a command in a new network namespace with only `lo` up."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        _missing("unshare and ip (util-linux, iproute2) are needed for a loopback-only namespace")
    base = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--net", "--map-root-user"]
    probe = subprocess.run(
        [*base, "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        _missing(f"cannot make a network namespace here: {probe.stderr.strip()}")
    return [*base, "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]
