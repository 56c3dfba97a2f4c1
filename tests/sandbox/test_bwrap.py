"""The bwrap provider, for real: every canary of `trialkit sandbox check` holds; the canaries
see a sandbox that leaks; exec, files, users, phases and limits behave as documented."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.sandbox._bwrap import bwrap_provider
from trialkit.sandbox.base import ExecResult, Limits, NetworkPolicy, SandboxPolicy
from trialkit.sandbox.bwrap import ETC_ALLOWED, BwrapProvider
from trialkit.sandbox.check import CANARIES, ProviderReport, check_provider

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX only")


@pytest.fixture(scope="module")
def report() -> ProviderReport:
    return anyio.run(check_provider, bwrap_provider())


@pytest.mark.parametrize("canary", [spec.name for spec in CANARIES])
def test_every_canary_holds_in_bwrap(report: ProviderReport, canary: str) -> None:
    result = next(r for r in report.results if r.name == canary)
    if result.status == "not claimed":  # without root or a writable cgroup: said, not hidden
        assert canary in ("network", "fork-bomb", "memory-hog"), result
        pytest.skip(f"bwrap does not claim {canary} here: {result.detail}")
    assert result.status == "held", result.detail


def test_the_canaries_see_a_sandbox_that_leaks(tmp_path: Path) -> None:
    leaky = bwrap_provider(read_only=[str(Path.home())], read_write=["/tmp"], allow_host=True)

    class HostNetwork(BwrapProvider):
        def capabilities(self):  # type: ignore[no-untyped-def]
            claims = super().capabilities()
            return type(claims)(**{**vars(claims), "network": frozenset({"host"})})

    names = ["secret-file", "write-outside"]
    found = anyio.run(lambda: check_provider(leaky, only=names))
    assert {r.name: r.status for r in found.results} == dict.fromkeys(names, "broken")
    wide_open = HostNetwork(allow_host=True)
    # a provider claiming no confined network is not judged on it, but what it does is shown
    net = anyio.run(lambda: check_provider(wide_open, only=["network"])).results[0]
    assert net.status == "not claimed" and "reached a host service" in net.detail


@pytest.fixture
def server() -> Iterator[int]:
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"proxy")

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


FETCH = (
    "import sys, urllib.request\n"
    "try:\n"
    "    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n"
    "except OSError as exc:\n"
    "    print('failed', exc)\n"
)


def test_model_only_for_the_agent_then_none_for_the_graders(tmp_path: Path, server: int) -> None:
    provider = bwrap_provider()
    if "model-only" not in provider.capabilities().network:
        pytest.skip("model-only needs root here")
    url = f"http://localhost:{server}/v1"
    policy = SandboxPolicy("bwrap", NetworkPolicy("model-only"), NetworkPolicy("none"))

    async def main() -> tuple[str, str]:
        async with provider.sandbox(tmp_path, policy, [url]) as sandbox:
            agent = await sandbox.exec(["python3", "-c", FETCH, url])
            await sandbox.set_phase("grader")
            grader = await sandbox.exec(["python3", "-c", FETCH, url])
            return agent.stdout_text, grader.stdout_text

    agent, grader = anyio.run(main)
    assert agent == "proxy\n"  # at the same URL, "localhost" included
    assert grader.startswith("failed")


def test_only_the_passed_environment_and_a_home_and_tmp_of_the_trials_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRIALKIT_TEST_HOST_ONLY", "secret")
    provider = bwrap_provider()
    policy = SandboxPolicy(
        "bwrap", NetworkPolicy("none"), NetworkPolicy("none"), env={"FROM_POLICY": "p"}
    )

    async def main() -> tuple[ExecResult, ExecResult]:
        async with provider.sandbox(tmp_path, policy) as sandbox:
            first = await sandbox.exec(
                ["sh", "-c", 'env; echo kept > "$HOME/h"; echo kept > /tmp/t; pwd'],
                env={"FROM_CALL": "c"},
            )
            second = await sandbox.exec(["sh", "-c", 'cat "$HOME/h" /tmp/t'])
            return first, second

    first, second = anyio.run(main)
    variables = dict(
        line.split("=", 1) for line in first.stdout_text.splitlines()[:-1] if "=" in line
    )
    assert set(variables) == {"PATH", "HOME", "TMPDIR", "LANG", "PWD", "FROM_POLICY", "FROM_CALL"}
    assert first.stdout_text.splitlines()[-1] == os.path.realpath(tmp_path)
    assert second.stdout_text == "kept\nkept\n"  # the trial's HOME and /tmp, kept between calls
    assert not (Path("/tmp") / "t").exists() or (Path("/tmp") / "t").read_text() != "kept\n"


def test_etc_holds_only_the_allowlist_and_never_a_secret(tmp_path: Path) -> None:
    provider = bwrap_provider()

    async def main() -> str:
        async with provider.sandbox(tmp_path, provider.default_policy()) as sandbox:
            return (await sandbox.exec(["sh", "-c", "cd /etc && find . -maxdepth 2"])).stdout_text

    seen = {line.removeprefix("./") for line in anyio.run(main).splitlines()} - {"."}
    tops = {name.split("/")[0] for name in seen}
    assert tops <= {name.split("/")[0] for name in ETC_ALLOWED}
    for secret in ("shadow", "gshadow", "sudoers", "ssh", "ssl/private", "pip.conf", "npmrc"):
        assert secret not in seen and secret not in ETC_ALLOWED


def test_a_user_id_files_it_writes_and_a_symlink_out_of_the_workspace(tmp_path: Path) -> None:
    provider = bwrap_provider()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret")
    (workspace / "link").symlink_to(outside)

    async def main() -> tuple[ExecResult, bytes | None]:
        async with provider.sandbox(workspace, provider.default_policy()) as sandbox:
            who = await sandbox.exec(["sh", "-c", "id -u; echo made > made.txt"], user="1000")
            try:
                leaked: bytes | None = await sandbox.read_file("link")
            except FileNotFoundError:
                leaked = None
            return who, leaked

    who, leaked = anyio.run(main)
    assert who.stdout_text == "1000\n"
    made = workspace / "made.txt"
    assert made.read_text() == "made\n" and made.stat().st_uid == os.geteuid()
    assert leaked is None  # read inside the sandbox, where the link's target is not


def test_a_limit_that_ended_a_command_is_named(tmp_path: Path) -> None:
    provider = bwrap_provider()
    limits = Limits(disk_bytes=1 << 20, cpu_seconds=1)
    policy = SandboxPolicy("bwrap", NetworkPolicy("none"), NetworkPolicy("none"), limits=limits)

    async def main() -> tuple[ExecResult, ExecResult, ExecResult]:
        async with provider.sandbox(tmp_path, policy) as sandbox:
            big = await sandbox.exec(["sh", "-c", "head -c 3000000 /dev/zero > big"])
            spread = await sandbox.exec(
                ["sh", "-c", "for i in 1 2 3; do head -c 600000 /dev/zero > f$i; done"]
            )
            fine = await sandbox.exec(["true"])
            return big, spread, fine

    big, spread, fine = anyio.run(main)
    assert big.limit == "disk"  # one file over the limit: stopped by RLIMIT_FSIZE
    assert spread.limit == "disk" and spread.returncode == 0  # together over it: found after
    assert fine.limit == "disk"  # the disk is still full: every command says so


def test_a_command_that_cannot_start_is_one_clear_error(tmp_path: Path) -> None:
    provider = bwrap_provider()

    async def main() -> ExecResult:
        async with provider.sandbox(tmp_path, provider.default_policy()) as sandbox:
            return await sandbox.exec(["no-such-program-here"])

    result = anyio.run(main)
    assert result.returncode != 0 and "no-such-program-here" in result.stderr_text


RUNNER = """
import sys, anyio
from pathlib import Path
from trialkit.sandbox.base import Limits, NetworkPolicy, SandboxPolicy
from trialkit.sandbox.bwrap import BwrapProvider

async def main():
    provider = BwrapProvider()
    limits = Limits(memory_bytes=1 << 30, processes=100)
    policy = SandboxPolicy("bwrap", NetworkPolicy("none"), NetworkPolicy("none"), limits=limits)
    async with provider.sandbox(Path(sys.argv[1]), policy) as sandbox:
        marker = sys.argv[2]
        script = f"setsid sleep {marker} & (sleep {marker} &); sleep {marker}"
        await sandbox.open_process(["sh", "-c", script])
        print("ready", flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


def test_nothing_is_left_after_sigkill_of_the_runner_and_cleanup(tmp_path: Path) -> None:
    import secrets
    import signal
    import subprocess
    import sys
    import time

    from trialkit.sandbox.check import _processes_with

    provider = bwrap_provider()
    marker = f"900.{secrets.randbelow(10**9):09d}"
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path), marker],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert runner.stdout is not None and runner.stdout.readline() == "ready\n"
    for _ in range(100):  # the three sleeps are up (inside the sandbox)
        if len(list(_processes_with(f"sleep\0{marker}"))) == 3:
            break
        time.sleep(0.05)
    assert len(list(_processes_with(f"sleep\0{marker}"))) == 3
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    runner.stdout.close()
    for _ in range(100):
        if not list(_processes_with(f"sleep\0{marker}")):
            break
        time.sleep(0.05)
    assert list(_processes_with(f"sleep\0{marker}")) == []
    tag = f"trialkit-{runner.pid}-"
    left = [p for parent in provider.cgroups.parents.values() for p in parent.glob(f"{tag}*")]
    states = list(Path(tempfile_dir()).glob(f"trialkit-sandbox-{runner.pid}-*"))
    assert states  # what a killed run leaves, until cleanup
    assert anyio.run(provider.cleanup) >= len(states) + (1 if left else 0)
    assert not [p for p in left if p.exists()]
    assert not [p for p in states if p.exists()]


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()
