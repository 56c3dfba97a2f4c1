"""The docker provider (and podman, the same code, where a test image is given), against a real
daemon: exec, files, the network of each phase, limits named as limits, images from a
Dockerfile cached by content, refusals in one line, what a killed run leaves removed, and every
canary of `trialkit sandbox check`."""

from __future__ import annotations

import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from tests.sandbox._docker import container_provider, image_for
from trialkit.cli.main import cli
from trialkit.sandbox.base import (
    LimitExceeded,
    Limits,
    NetworkPolicy,
    PolicyRefused,
    SandboxPolicy,
    SandboxUnavailable,
)
from trialkit.sandbox.check import CANARIES, ProviderReport, check_provider
from trialkit.sandbox.docker import IMAGE_ENV, DockerProvider

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX only")

ENGINES = ["docker", "podman"]


def policy(
    name: str = "docker",
    network: str = "none",
    grader: str | None = None,
    **limits: float,
) -> SandboxPolicy:
    return SandboxPolicy(
        provider=name,
        network=NetworkPolicy(network),  # type: ignore[arg-type]
        grader_network=NetworkPolicy(grader or network),  # type: ignore[arg-type]
        limits=Limits(**limits),  # type: ignore[arg-type]
    )


def _labelled(label: str, engine: str = "docker") -> list[str]:
    shown = subprocess.run(
        [engine, "ps", "--all", "--quiet", "--filter", f"label={label}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return shown.stdout.split()


@pytest.fixture
def server() -> Iterator[int]:
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"proxy answered")

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


FETCH = (
    "import sys, urllib.request\n"
    "for url in sys.argv[1:]:\n"
    "    try:\n"
    "        print(urllib.request.urlopen(url, timeout=5).read().decode())\n"
    "    except OSError as exc:\n"
    "        print('failed', type(exc).__name__)\n"
)


@pytest.mark.parametrize("engine", ENGINES)
def test_exec_runs_in_the_image_as_a_user_that_owns_the_workspace(
    engine: str, tmp_path: Path
) -> None:
    provider = container_provider(engine)
    (tmp_path / "given.txt").write_text("from the host")
    owner = tmp_path.stat().st_uid
    where = str(tmp_path.resolve())
    os.environ["TRIALKIT_TEST_HOST_SECRET"] = "host-only"

    async def main() -> None:
        async with provider.sandbox(tmp_path, policy(engine)) as box:
            assert box.info.provider == engine and box.info.isolated
            assert box.info.image == image_for(engine)
            shown = await box.exec(
                ["sh", "-c", "id -u; pwd; cat given.txt; echo; env; cat; echo made > made.txt"],
                input="stdin text",
                env={"GIVEN": "yes"},
            )
            assert shown.returncode == 0, shown.stderr_text
            uid, cwd, given, *rest = shown.stdout_text.splitlines()
            assert uid != "0"  # never root in the container
            assert cwd == where
            assert given == "from the host"
            assert "GIVEN=yes" in rest and "HOME=/home/trialkit" in rest
            assert not any("TRIALKIT_TEST_HOST_SECRET" in line for line in rest)
            assert rest[-1] == "stdin text"
            failed = await box.exec(["sh", "-c", "echo oops >&2; exit 3"])
            assert (failed.returncode, failed.stderr_text, failed.limit) == (3, "oops\n", None)
            assert not failed.success
            missing = await box.exec(["no-such-command"])
            assert missing.returncode != 0 and missing.limit is None
            as_root = await box.exec(["id", "-u"], user="0")
            assert as_root.stdout_text.strip() == "0"

    try:
        anyio.run(main)
    finally:
        del os.environ["TRIALKIT_TEST_HOST_SECRET"]
    made = tmp_path / "made.txt"
    assert made.read_text() == "made\n"
    # the workspace is the host user's again once the trial ended
    assert {p.stat().st_uid for p in [tmp_path, made, tmp_path / "given.txt"]} == {owner}


def test_more_host_paths_bound_read_only_or_read_write(tmp_path: Path) -> None:
    tools, shared, workspace = tmp_path / "tools", tmp_path / "shared", tmp_path / "ws"
    for folder in (tools, shared, workspace):
        folder.mkdir()
        folder.chmod(0o777)
    (tools / "tool.sh").write_text("echo from a host tool\n")
    (tmp_path / "secret.txt").write_text("beside the bound folders, not bound")
    provider = container_provider(read_only=[str(tools)], read_write=[str(shared)])

    async def main() -> list[str]:
        async with provider.sandbox(workspace, policy()) as box:
            script = (
                f"sh {tools}/tool.sh; touch {tools}/x 2>/dev/null || echo read-only; "
                f"echo y > {shared}/y && echo written; ls {tmp_path}"
            )
            return (await box.exec(["sh", "-c", script])).stdout_text.splitlines()

    seen = anyio.run(main)
    assert seen[:3] == ["from a host tool", "read-only", "written"]
    assert sorted(seen[3:]) == ["shared", "tools", "ws"]  # the mount points, not secret.txt
    assert (shared / "y").read_text() == "y\n" and not (tools / "x").exists()


def _command_lines() -> list[bytes]:
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            lines.append(Path(f"/proc/{pid}/cmdline").read_bytes())
    return lines


def test_values_of_variables_never_appear_on_a_command_line(tmp_path: Path) -> None:
    secret = f"sk-test-{os.getpid()}-{tmp_path.name}"
    provider = container_provider()
    asked = SandboxPolicy(
        provider="docker", network=NetworkPolicy("none"), env={"FROM_POLICY": secret + "-p"}
    )

    async def main() -> tuple[str, list[bytes]]:
        async with provider.sandbox(tmp_path, asked) as box:
            process = await box.open_process(
                ["sh", "-c", 'echo "$API_KEY $FROM_POLICY"; read _ || true'],
                env={"API_KEY": secret},
                stdin=True,
            )
            assert process.stdout is not None and process.stdin is not None
            printed = (await process.stdout.receive()).decode()
            lines = await anyio.to_thread.run_sync(_command_lines)
            await process.stdin.aclose()
            assert await process.wait() == 0
            await process.aclose()
            return printed, lines

    printed, command_lines = anyio.run(main)
    assert printed == f"{secret} {secret}-p\n"
    assert any(b"docker\0exec" in line for line in command_lines)
    assert not any(secret.encode() in line for line in command_lines)


def test_files_in_and_out(tmp_path: Path) -> None:
    provider = container_provider()
    source = tmp_path / "source"
    (source / "deep").mkdir(parents=True)
    (source / "deep" / "a.txt").write_text("A")
    workspace = tmp_path / "ws"
    workspace.mkdir()

    async def main() -> None:
        async with provider.sandbox(workspace, policy()) as box:
            await box.write_file("notes/n.txt", "in the workspace")
            await box.write_file("/tmp/outside.txt", b"\x00binary\xff")
            assert await box.read_file("/tmp/outside.txt") == b"\x00binary\xff"
            assert await box.read_file(f"{workspace.resolve()}/notes/n.txt") == (
                b"in the workspace"
            )
            appended = await box.exec(["sh", "-c", "echo more >> notes/n.txt"])
            assert appended.returncode == 0, appended.stderr_text  # the user may write it
            with pytest.raises(FileNotFoundError):
                await box.read_file("/tmp/never-written")
            await box.copy_in(source, "/tmp/copied")
            listed = await box.exec(["cat", "/tmp/copied/deep/a.txt"])
            assert listed.stdout_text == "A"
            await box.copy_out("/tmp/copied", tmp_path / "back")

    anyio.run(main)
    assert (workspace / "notes" / "n.txt").read_text() == "in the workspacemore\n"
    assert (tmp_path / "back" / "deep" / "a.txt").read_text() == "A"


def test_a_symlink_out_of_the_workspace_is_not_followed_on_the_host(tmp_path: Path) -> None:
    provider = container_provider()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret")
    (workspace / "link").symlink_to(outside)

    async def main() -> bytes | None:
        async with provider.sandbox(workspace, policy()) as box:
            # written inside the container, where the link's target is not
            with contextlib.suppress(PermissionError):
                await box.write_file("link", "overwritten")
            try:
                return await box.read_file("link")
            except FileNotFoundError:
                return None

    leaked = anyio.run(main)
    assert leaked != b"host secret"
    assert outside.read_text() == "host secret"


@pytest.mark.parametrize("engine", ENGINES)
def test_network_none_and_model_only_by_phase(engine: str, tmp_path: Path, server: int) -> None:
    provider = container_provider(engine)
    if "model-only" not in provider.capabilities().network:
        pytest.skip("model-only needs root here (the bridge enters the container's namespace)")
    allowed = f"http://127.0.0.1:{server}/v1"
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    forbidden = f"http://127.0.0.1:{other.server_address[1]}/"

    async def fetch(box: object, *urls: str) -> list[str]:
        result = await box.exec(["python3", "-c", FETCH, *urls], timeout=30)  # type: ignore[attr-defined]
        return list(result.stdout_text.splitlines())

    async def main() -> None:
        agent = policy(engine, network="model-only", grader="none")
        async with provider.sandbox(tmp_path, agent, [allowed]) as box:
            assert await fetch(box, allowed, forbidden, "http://192.0.2.1/") == [
                "proxy answered",
                "failed URLError",
                "failed URLError",
            ]
            # an endpoint added while the trial runs (an MCP server of one turn) is reached too
            assert await fetch(box, forbidden) == ["failed URLError"]
            await box.allow([forbidden])  # type: ignore[attr-defined]
            assert await fetch(box, forbidden) == ["failed HTTPError"]  # its server answers 501
            await box.set_phase("grader")  # the graders' network: none
            assert await fetch(box, allowed, forbidden) == ["failed URLError"] * 2
        async with provider.sandbox(tmp_path, policy(engine, network="none"), [allowed]) as box:
            assert await fetch(box, allowed) == ["failed URLError"]

    try:
        anyio.run(main)
    finally:
        other.shutdown()
        other.server_close()


@pytest.mark.parametrize(
    ("limits", "argv", "name"),
    [
        (
            {"memory_bytes": 64 << 20},
            ["python3", "-c", "x = [bytearray(1 << 20) for _ in range(400)]"],
            "memory",
        ),
        ({"processes": 32}, ["sh", "-c", "f() { f & f & wait; }; f"], "processes"),
        ({"cpu_seconds": 1}, ["sh", "-c", "while :; do :; done"], "cpu_time"),
        ({"wall_clock_seconds": 1}, ["sleep", "30"], "wall_clock"),
        ({"output_bytes": 10_000}, ["sh", "-c", "yes"], "output"),
    ],
)
def test_a_limit_hit_is_named(
    limits: dict[str, float], argv: list[str], name: str, tmp_path: Path
) -> None:
    provider = container_provider()

    async def main() -> None:
        async with provider.sandbox(tmp_path, policy(**limits)) as box:
            assert {k: v for k, v in box.info.limits.items() if k in limits} == limits
            result = await box.exec(argv, timeout=None if name == "wall_clock" else 30)
            assert result.limit == name, result
            assert not result.success
            with pytest.raises(LimitExceeded) as raised:
                result.raise_for_limit()
            assert raised.value.limit == name
            after = await box.exec(["echo", "still here"])  # the trial's sandbox lives on
            assert after.stdout_text == "still here\n" and after.limit is None

    anyio.run(main)


def test_a_dockerfile_is_built_once_per_content(tmp_path: Path) -> None:
    provider = container_provider()
    context = tmp_path / "image"
    context.mkdir()
    (context / "greeting.txt").write_text("hello from the image")
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(f"FROM {image_for('docker')}\nCOPY greeting.txt /greeting.txt\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    asked = SandboxPolicy(provider="docker", network=NetworkPolicy("none"), dockerfile=dockerfile)

    async def main() -> tuple[str, str, str]:
        await provider.setup(asked)
        first = await provider.image_for(asked)
        async with provider.sandbox(workspace, asked) as box:
            shown = await box.exec(["cat", "/greeting.txt"])
            assert shown.stdout_text == "hello from the image"
            assert box.info.image == first
        again = await DockerProvider(image=image_for("docker")).image_for(asked)  # a new run
        (context / "greeting.txt").write_text("changed")
        changed = await DockerProvider().image_for(asked)
        return first, again, changed

    first, again, changed = anyio.run(main)
    assert first.startswith("trialkit-sandbox:") and again == first
    assert changed != first and changed.startswith("trialkit-sandbox:")
    subprocess.run(["docker", "image", "rm", changed], capture_output=True, check=False)


def test_an_image_that_is_not_here_is_refused_in_one_line(tmp_path: Path) -> None:
    provider = container_provider()
    absent = "registry.invalid/trialkit/absent:1"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {absent} AS base\nFROM base\nRUN true\n")
    for asked in (
        SandboxPolicy(provider="docker", network=NetworkPolicy("none"), image=absent),
        SandboxPolicy(provider="docker", network=NetworkPolicy("none"), dockerfile=dockerfile),
    ):
        with pytest.raises(SandboxUnavailable) as checked:
            provider.check(asked)  # before any trial
        with pytest.raises(SandboxUnavailable) as set_up:
            anyio.run(provider.setup, asked)
        for line in (str(checked.value), str(set_up.value)):
            assert "\n" not in line and f"'{absent}'" in line
            assert "cannot be pulled" in line and "`bwrap` provider" in line
            assert "debootstrap" in line


def test_policies_it_cannot_enforce_are_refused_before_any_trial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    provider = container_provider()
    provider.check(policy(network="none"))
    if os.geteuid() == 0:  # allowlist is enforced as root (tests/sandbox/test_allowlist.py)
        provider.check(policy(network="allowlist"))
    unported = replace(policy(), network=NetworkPolicy("allowlist", ("example.com",)))
    with pytest.raises(PolicyRefused, match=r"'example\.com' is not host:port"):
        provider.check(unported)
    with pytest.raises(PolicyRefused, match="disk"):
        provider.check(policy(disk_bytes=1 << 30))
    with pytest.raises(PolicyRefused, match="host's network"):
        provider.check(policy(network="host", grader="none"))
    with pytest.raises(PolicyRefused, match="needs an image"):
        DockerProvider().check(policy())


KILLED_RUN = """
import sys, anyio
from pathlib import Path
from trialkit.sandbox.base import NetworkPolicy, SandboxPolicy
from trialkit.sandbox.registry import load_provider

async def main():
    provider = load_provider(sys.argv[1], image=sys.argv[2], run_id=sys.argv[3])
    policy = SandboxPolicy(provider=sys.argv[1], network=NetworkPolicy("none"))
    async with provider.sandbox(Path(sys.argv[4]), policy) as box:
        await box.exec(["true"])
        print("started", flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_nothing_of_a_killed_run_is_left_after_cleanup(engine: str, tmp_path: Path) -> None:
    provider = container_provider(engine)
    image = image_for(engine)
    run_id = f"killed-{os.getpid()}-{tmp_path.name}"
    runner = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, engine, image, run_id, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert runner.stdout is not None
    assert runner.stdout.readline() == "started\n"
    assert len(_labelled(f"org.trialkit.run={run_id}", engine)) == 1
    os.killpg(runner.pid, signal.SIGKILL)  # the runner and its engine clients, at once
    runner.wait()
    runner.stdout.close()
    dead = subprocess.Popen(["true"])
    dead.wait()

    def start(owner_pid: int) -> str:
        return subprocess.run(
            [engine, "run", "--detach", *provider.engine.run_args(),
             *provider.extra_run_args(), "--label", f"org.trialkit.sandbox={engine}",
             "--label", f"org.trialkit.run={run_id}-{owner_pid}",
             "--label", f"org.trialkit.owner={os.uname().nodename}:{owner_pid}",
             "--entrypoint", "sleep", image, "600"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    # one a killed run's client could not end (a stuck client, a daemon that was down) ...
    left = start(dead.pid)
    # ... and one of a run still alive (this process), which cleanup keeps
    alive = start(os.getpid())
    try:
        cleaned = subprocess.run(
            [sys.executable, "-m", "trialkit", "sandbox", "cleanup", engine],
            capture_output=True,
            text=True,
            check=False,
        )
        assert cleaned.returncode == 0, cleaned.stderr
        assert cleaned.stdout.startswith(f"{engine}: removed ")
        assert int(cleaned.stdout.split()[-1]) >= 1
        assert _labelled(f"org.trialkit.run={run_id}", engine) == []
        assert _labelled(f"org.trialkit.run={run_id}-{dead.pid}", engine) == []
        assert _labelled(f"org.trialkit.run={run_id}-{os.getpid()}", engine) == [alive[:12]]
    finally:
        for container in (alive, left):  # podman removes none of a list naming one gone
            subprocess.run([engine, "rm", "--force", container], capture_output=True, check=False)


@pytest.fixture(scope="module")
def report() -> ProviderReport:
    return anyio.run(check_provider, container_provider())


@pytest.mark.parametrize("canary", [spec.name for spec in CANARIES])
def test_every_canary_holds_in_docker(report: ProviderReport, canary: str) -> None:
    result = next(r for r in report.results if r.name == canary)
    assert result.status == "held", result.detail


def test_sandbox_check_without_an_image_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    container_provider()  # a daemon is here
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    result = CliRunner().invoke(cli, ["sandbox", "check", "docker"])
    assert result.exit_code == 2, result.output
    assert "needs an image" in result.output and IMAGE_ENV in result.output
    assert "Traceback" not in result.output and "held" not in result.output
