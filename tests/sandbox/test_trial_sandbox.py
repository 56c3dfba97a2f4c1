"""The trial's sandbox (`ctx.sandbox`), for real in bwrap: one per trial, shared by the agent
(a Python harness or a command-line agent) and the graders, which run commands in it on the
files the agent left; recorded on the trial, in the store and in the JSON report; a limit hit
by the agent or by a grader's command is a trial error naming the limit, even when the code
that ran the command ignored it; without a sandbox named, the `local` provider's over the
workspace."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from click.testing import CliRunner

from tests.capture.helpers import errors, run_trials
from tests.sandbox._bwrap import bwrap_provider
from trialkit import Suite, Task
from trialkit.cli.main import cli
from trialkit.environments.workspace import Workspace
from trialkit.graders.base import GradeContext
from trialkit.harness.base import TrialContext
from trialkit.harness.subprocess import SubprocessAgent
from trialkit.sandbox.base import Limits, NetworkPolicy, Sandbox, SandboxPolicy
from trialkit.sandbox.local import LocalProvider
from trialkit.score import Verdict
from trialkit.store.store import Store
from trialkit.trial import TrialStatus

NONE = NetworkPolicy("none")
BUGGY = "def add(a, b):\n    return a - b\n"
CHECK = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('1 passed')\n"
FIX = (
    "import pathlib\n"
    "p = pathlib.Path('calc.py')\n"
    "p.write_text(p.read_text().replace('a - b', 'a + b'))\n"
    "pathlib.Path('/tmp/agent-was-here').write_text('the agent')\n"
    "print('fixed')\n"
)


def bwrap_policy(**limits: Any) -> SandboxPolicy:
    bwrap_provider()
    return SandboxPolicy("bwrap", NONE, NONE, limits=Limits(**limits))


def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text(BUGGY)
    (folder / "check_calc.py").write_text(CHECK)
    return folder


async def run_the_tests(ctx: GradeContext) -> bool:
    """The project's tests, run in the trial's sandbox after the agent."""
    assert ctx.sandbox is not None
    result = await ctx.sandbox.exec(["/usr/bin/python3", "check_calc.py"], timeout=60)
    return result.returncode == 0


def test_a_python_agent_and_a_grader_share_the_trials_sandbox(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    async def agent(prompt: str, ctx: TrialContext) -> str:
        assert ctx.sandbox is not None
        seen["agent"] = ctx.sandbox
        inside = await ctx.sandbox.exec(["sh", "-c", "hostname; cat /etc/shadow; echo $HOME"])
        await ctx.sandbox.exec(["/usr/bin/python3", "-c", FIX])
        return inside.stdout_text

    async def grader(ctx: GradeContext) -> bool:
        assert ctx.sandbox is not None
        seen["grader"], seen["phase"] = ctx.sandbox, ctx.sandbox.phase
        seen["tmp"] = (await ctx.sandbox.read_file("/tmp/agent-was-here")).decode()
        return await run_the_tests(ctx)

    task = Task(id="fix", input="fix add", graders=[grader])
    suite = Suite(
        id="py",
        harness=agent,
        tasks=[task],
        environment=Workspace(project(tmp_path)),
        sandbox=bwrap_policy(processes=None),
    )
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert errors(trials) == [] and trial.verdict == Verdict.PASS
    hostname, shadow_and_home = (trial.outcome.output or "").split("\n", 1)
    assert hostname == "sandbox" and "root:" not in shadow_and_home  # not the host's
    assert seen["agent"] is seen["grader"] and seen["phase"] == "grader"
    assert seen["tmp"] == "the agent"  # the sandbox's own /tmp, kept from agent to grader
    assert not Path("/tmp/agent-was-here").exists()
    assert trial.sandbox is not None
    assert (trial.sandbox.provider, trial.sandbox.isolated) == ("bwrap", True)
    assert (trial.sandbox.network, trial.sandbox.grader_network) == ("none", "none")
    assert trial.sandbox.limit_hit is None
    assert [change.path for change in trial.outcome.diff.files] == ["calc.py"]


@pytest.mark.parametrize(("fix", "verdict"), [(True, Verdict.PASS), (False, Verdict.FAIL)])
def test_a_grader_runs_the_tests_where_the_command_line_agent_ran(
    tmp_path: Path, fix: bool, verdict: Verdict
) -> None:
    script = FIX if fix else "import pathlib; pathlib.Path('/tmp/agent-was-here').write_text('x')"
    agent = SubprocessAgent(["/usr/bin/python3", "-c", script], timeout=60)
    agent.in_sandbox(bwrap_policy())

    async def same_tmp(ctx: GradeContext) -> bool:
        assert ctx.sandbox is not None
        return (await ctx.sandbox.read_file("/tmp/agent-was-here")) != b""

    task = Task(id="fix", input="fix add", graders=[run_the_tests, same_tmp])
    suite = Suite(id="cli", harness=agent, tasks=[task], environment=Workspace(project(tmp_path)))
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert errors(trials) == []
    assert [s.verdict for s in trial.scores] == [verdict, Verdict.PASS]
    assert trial.verdict == verdict
    assert trial.sandbox is not None and trial.sandbox.provider == "bwrap"


def output_hog(where: str, expect: str = "success") -> tuple[Task, Any]:
    """A task whose agent (or grader) runs `yes` past the output limit and ignores that."""

    async def agent(prompt: str, ctx: TrialContext) -> str:
        assert ctx.sandbox is not None
        if where == "agent":
            await ctx.sandbox.exec(["yes"])  # stopped at the limit; the result is dropped
        return "all good"

    async def swallowing(ctx: GradeContext) -> bool:
        assert ctx.sandbox is not None
        if where == "grader":
            await ctx.sandbox.exec(["yes"])
        return True

    async def failing(ctx: GradeContext) -> bool:
        return False

    graders = [swallowing, failing] if where == "grader" else [swallowing]
    return Task(id="hog", input="-", graders=graders, expect=expect), agent  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("where", "expect", "message"),
    [
        ("agent", "success", "the agent hit the bwrap sandbox's output limit"),
        ("agent", "failure", "the agent hit the bwrap sandbox's output limit"),
        ("grader", "success", "a grader's command hit the bwrap sandbox's output limit"),
    ],
)
def test_a_limit_hit_and_ignored_is_a_trial_error_naming_it(
    tmp_path: Path, where: str, expect: str, message: str
) -> None:
    task, agent = output_hog(where, expect)
    policy = bwrap_policy(output_bytes=10_000)
    _, trials, _ = run_trials(Suite(id="hog", harness=agent, tasks=[task], sandbox=policy))
    (trial,) = trials
    assert trial.verdict == Verdict.ERROR and trial.status is TrialStatus.ERROR
    assert trial.error is not None and trial.error.type == "LimitExceeded"
    assert message in trial.error.message
    assert trial.error.phase == ("agent" if where == "agent" else "grading")
    assert trial.sandbox is not None and trial.sandbox.limit_hit == "output"
    assert trial.sandbox.limits["output_bytes"] == 10_000


def test_a_limit_a_command_line_agents_child_hits_is_a_trial_error(tmp_path: Path) -> None:
    provider = bwrap_provider()
    if "processes" not in provider.capabilities().limits:
        pytest.skip("no writable cgroup here: no process limit to hit")
    # the agent forks until refused, says nothing of it and exits 0
    bomb = (
        "import os, time\n"
        "kids = []\n"
        "try:\n"
        "    while True:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(30); os._exit(0)\n"
        "        kids.append(pid)\n"
        "except OSError:\n"
        "    pass\n"
        "print('done')\n"
    )
    agent = SubprocessAgent(["/usr/bin/python3", "-c", bomb], timeout=60)
    agent.in_sandbox(SandboxPolicy("bwrap", NONE, NONE, limits=Limits(processes=16)))
    task = Task(id="bomb", input="-", graders=[lambda ctx: True])
    _, trials, _ = run_trials(Suite(id="bomb", harness=agent, tasks=[task]))
    (trial,) = trials
    assert trial.verdict == Verdict.ERROR
    assert trial.error is not None and "processes limit" in trial.error.message
    assert trial.sandbox is not None and trial.sandbox.limit_hit == "processes"


def test_without_a_sandbox_named_ctx_sandbox_is_local_over_the_workspace(tmp_path: Path) -> None:
    folder = project(tmp_path)

    async def agent(prompt: str, ctx: TrialContext) -> str:
        assert ctx.sandbox is not None
        found = await ctx.sandbox.exec(["pwd"])
        return found.stdout_text.strip()

    task = Task(id="pwd", input="-", graders=[run_the_tests])
    suite = Suite(id="local", harness=agent, tasks=[task], environment=Workspace(folder))
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert trial.outcome.output != str(folder)  # a fresh copy of the fixture
    assert Path(trial.outcome.output or "").name != "" and trial.verdict == Verdict.FAIL
    assert trial.sandbox is not None
    assert (trial.sandbox.provider, trial.sandbox.isolated, trial.sandbox.network) == (
        "local",
        False,
        "host",
    )


def test_without_a_sandbox_or_a_workspace_there_is_none(tmp_path: Path) -> None:
    async def agent(prompt: str, ctx: TrialContext) -> str:
        return f"sandbox {ctx.sandbox}"

    _, trials, _ = run_trials(Suite(id="none", harness=agent, tasks=[Task(id="t", input="-")]))
    assert trials[0].outcome.output == "sandbox None" and trials[0].sandbox is None


def test_a_named_sandbox_is_recorded_even_when_nothing_ran_in_it() -> None:
    def agent(prompt: str) -> str:
        return "hi"

    policy = bwrap_policy(memory_bytes=None)
    suite = Suite(id="quiet", harness=agent, tasks=[Task(id="t", input="-")], sandbox=policy)
    _, trials, _ = run_trials(suite)
    assert trials[0].sandbox is not None and trials[0].sandbox.provider == "bwrap"


def test_the_sandbox_is_stored_and_in_the_json_report(tmp_path: Path) -> None:
    bwrap_provider()
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "agent.py").write_text(
        "async def run(prompt, ctx):\n"
        "    done = await ctx.sandbox.exec(['sh', '-c', 'echo inside > made.txt; hostname'])\n"
        "    return done.stdout_text.strip()\n"
    )
    (folder / "suite.yaml").write_text(
        "id: stored\n"
        "harness: {python: agent:run}\n"
        "sandbox: {provider: bwrap, network: none, limits: {output_bytes: 50000}}\n"
        "tasks:\n"
        "  - {id: t, input: go, graders: [{contains: sandbox}]}\n"
    )
    store_url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    report = tmp_path / "report.json"
    args = ["run", str(folder), "--no-progress", "--store", store_url, "--json", str(report)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (listed,) = json.loads(report.read_text())["tasks"][0]["results"]
    assert listed["sandbox"]["provider"] == "bwrap"
    assert listed["sandbox"]["network"] == "none"
    assert listed["sandbox"]["limits"]["output_bytes"] == 50000
    store = Store(store_url)
    try:
        (run,) = store.list_runs()
        stored = store.load_trial(run.id, "t", 0)
        from_store = store.load_report(run.id).model_dump(mode="json")
    finally:
        store.close()
    assert stored.sandbox is not None and stored.sandbox.provider == "bwrap"
    assert stored.sandbox.limits == {"output_bytes": 50000}
    assert from_store["tasks"][0]["results"][0]["sandbox"] == listed["sandbox"]
    shown = CliRunner().invoke(cli, ["transcripts", "show", f"{run.id}/t#0", "--store", store_url])
    assert shown.exit_code == 0, shown.output
    assert "sandbox bwrap (isolated), network none / graders none" in shown.output


def test_a_python_agent_and_a_grader_share_a_docker_container(tmp_path: Path) -> None:
    from tests.sandbox._docker import container_provider

    image = container_provider().options["image"]
    seen: list[str] = []

    async def agent(prompt: str, ctx: TrialContext) -> str:
        assert ctx.sandbox is not None
        await ctx.sandbox.exec(["python3", "-c", FIX])
        return (await ctx.sandbox.exec(["sh", "-c", "id -u; hostname"])).stdout_text

    async def grader(ctx: GradeContext) -> bool:
        assert ctx.sandbox is not None
        seen.append((await ctx.sandbox.exec(["hostname"])).stdout_text)
        result = await ctx.sandbox.exec(["python3", "check_calc.py"], timeout=60)
        return result.returncode == 0

    policy = SandboxPolicy("docker", NONE, NONE, image=image)
    suite = Suite(
        id="docker",
        harness=agent,
        tasks=[Task(id="fix", input="-", graders=[grader])],
        environment=Workspace(project(tmp_path)),
        sandbox=policy,
    )
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert errors(trials) == [] and trial.verdict == Verdict.PASS
    uid, hostname = (trial.outcome.output or "").split()
    assert uid != "0" and seen == [hostname + "\n"]  # the same container, agent and grader
    assert trial.sandbox is not None and trial.sandbox.provider == "docker"
    assert trial.sandbox.image == image and trial.sandbox.details["user"]
    assert [change.path for change in trial.outcome.diff.files] == ["calc.py"]


class CountingProvider(LocalProvider):
    """The local provider, counting its setups, teardowns and trial sandboxes."""

    counts: ClassVar[dict[str, int]] = {}

    async def setup(self, policy: SandboxPolicy) -> None:
        await anyio.sleep(0.05)  # trials that start meanwhile wait for it
        self.counts["setup"] = self.counts.get("setup", 0) + 1

    async def teardown(self) -> None:
        self.counts["teardown"] = self.counts.get("teardown", 0) + 1

    def sandbox(
        self, workspace: Path, policy: SandboxPolicy, endpoints: Sequence[str] = ()
    ) -> AbstractAsyncContextManager[Sandbox]:
        self.counts["opened"] = self.counts.get("opened", 0) + 1
        return super().sandbox(workspace, policy, endpoints)


def test_the_provider_is_set_up_once_per_run_and_each_trial_opens_one_sandbox() -> None:
    CountingProvider.counts.clear()

    async def agent(prompt: str, ctx: TrialContext) -> str:
        assert ctx.sandbox is not None
        await ctx.sandbox.write_file("note.txt", prompt)
        return (await ctx.sandbox.read_file("note.txt")).decode()

    async def grader(ctx: GradeContext) -> bool:
        assert ctx.sandbox is not None
        return (await ctx.sandbox.exec(["cat", "note.txt"])).stdout_text == ctx.input

    tasks = [Task(id=f"t{i}", input=f"hello {i}", graders=[grader], trials=2) for i in range(3)]
    suite = Suite(id="count", harness=agent, tasks=tasks, sandbox="local")
    provider = CountingProvider()
    suite.chosen_sandbox = (provider, provider.default_policy())
    _, trials, _ = run_trials(suite, concurrency=4)
    assert errors(trials) == [] and {t.verdict for t in trials} == {Verdict.PASS}
    assert CountingProvider.counts == {"setup": 1, "teardown": 1, "opened": 6}
    assert {t.sandbox.provider for t in trials if t.sandbox is not None} == {"local"}


@pytest.mark.parametrize(
    "harness",
    [
        "{python: agent:run}",
        "{command: [/usr/bin/python3, -c, 'import socket; print(socket.gethostname())']}",
    ],
    ids=["python", "command"],
)
def test_the_sandbox_flag_holds_in_worker_processes(tmp_path: Path, harness: str) -> None:
    bwrap_provider()
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "agent.py").write_text(
        "async def run(prompt, ctx):\n"
        "    done = await ctx.sandbox.exec(['hostname'])\n"
        "    return done.stdout_text.strip()\n"
    )
    (folder / "suite.yaml").write_text(
        f"id: workers\nharness: {harness}\n"
        "tasks:\n  - {id: t, input: go, trials: 4, graders: [{equals: sandbox}]}\n"
    )
    report = tmp_path / "report.json"
    store = f"sqlite:///{tmp_path / 'db.sqlite'}"
    args = ["run", str(folder), "--no-progress", "--store", store, "--json", str(report)]
    result = CliRunner().invoke(cli, [*args, "--sandbox", "bwrap", "--workers", "2"])
    assert result.exit_code == 0, result.output
    results = json.loads(report.read_text())["tasks"][0]["results"]
    assert [r["output"] for r in results] == ["sandbox"] * 4
    assert {r["sandbox"]["provider"] for r in results} == {"bwrap"}


def test_a_grader_that_raises_a_limit_makes_the_trial_an_error(tmp_path: Path) -> None:
    async def agent(prompt: str, ctx: TrialContext) -> str:
        return "done"

    async def slow_tests(ctx: GradeContext) -> bool:
        assert ctx.sandbox is not None
        result = await ctx.sandbox.exec(["sleep", "30"], timeout=0.5)  # its own bound
        result.raise_for_limit()
        return True

    async def failing(ctx: GradeContext) -> bool:
        return False

    task = Task(id="slow", input="-", graders=[failing, slow_tests])
    suite = Suite(id="slow", harness=agent, tasks=[task], sandbox=bwrap_policy())
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert trial.verdict == Verdict.ERROR and trial.status is TrialStatus.ERROR
    assert trial.error is not None and trial.error.type == "LimitExceeded"
    assert trial.error.message == "grader 'slow_tests': sandbox limit hit: wall_clock"
    assert trial.error.phase == "grading"
    assert [s.verdict for s in trial.scores] == [Verdict.FAIL, Verdict.ERROR]
    assert trial.sandbox is not None and trial.sandbox.limit_hit is None  # the grader's bound


def test_a_command_line_agent_runs_in_the_suites_sandbox(tmp_path: Path) -> None:
    agent = SubprocessAgent(["/usr/bin/python3", "-c", FIX], timeout=60)
    task = Task(id="fix", input="fix add", graders=[run_the_tests])
    suite = Suite(
        id="cli",
        harness=agent,
        tasks=[task],
        environment=Workspace(project(tmp_path)),
        sandbox=bwrap_policy(),
    )
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert errors(trials) == [] and trial.verdict == Verdict.PASS
    assert agent.sandbox_provider is not None and agent.sandbox_provider.name == "bwrap"
    assert not Path("/tmp/agent-was-here").exists()  # the sandbox's own /tmp
    assert trial.sandbox is not None and trial.sandbox.provider == "bwrap"


def test_a_command_line_agent_without_a_sandbox_is_recorded_as_local(tmp_path: Path) -> None:
    agent = SubprocessAgent(["/usr/bin/python3", "-c", "print('loose')"], timeout=60)
    task = Task(id="t", input="-")
    suite = Suite(id="loose", harness=agent, tasks=[task], environment=Workspace(project(tmp_path)))
    _, trials, _ = run_trials(suite)
    (trial,) = trials
    assert errors(trials) == [] and trial.outcome.output == "loose"
    assert trial.sandbox is not None
    assert (trial.sandbox.provider, trial.sandbox.isolated) == ("local", False)


@pytest.mark.parametrize(
    ("sandbox", "message"),
    [
        ("nosuch", "suite 's': sandbox: no sandbox provider 'nosuch'"),
        (SandboxPolicy("local", NONE, NONE), "sandbox 'local' cannot enforce network 'none'"),
        (42, "sandbox: a provider's name or a SandboxPolicy, got int"),
    ],
)
def test_a_suites_sandbox_that_cannot_be_had_is_refused_at_once(sandbox: Any, message: str) -> None:
    from trialkit.task import SuiteError

    with pytest.raises(SuiteError) as raised:
        Suite(id="s", tasks=[Task(id="t", input="-")], sandbox=sandbox)
    assert str(raised.value).startswith("suite 's': sandbox: ")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_python_agents_commands_reach_the_urls_it_allows_and_no_other() -> None:
    import http.server
    import threading

    provider = bwrap_provider()
    if "model-only" not in provider.capabilities().network:
        pytest.skip("model-only needs root here")

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the host")

        def log_message(self, *args: Any) -> None:
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    allowed, other = (f"http://127.0.0.1:{s.server_address[1]}/" for s in servers)
    fetch = (
        "import sys, urllib.request\n"
        "try:\n"
        "    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )

    async def agent(prompt: str, ctx: TrialContext) -> str:
        assert ctx.sandbox is not None
        await ctx.sandbox.allow([allowed])
        got = []
        for url in (allowed, other):
            done = await ctx.sandbox.exec(["/usr/bin/python3", "-c", fetch, url])
            got.append(done.stdout_text.strip())
        return " | ".join(got)

    policy = SandboxPolicy("bwrap", NetworkPolicy("model-only"), NONE)
    try:
        suite = Suite(id="net", harness=agent, tasks=[Task(id="t", input="-")], sandbox=policy)
        _, trials, _ = run_trials(suite)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    reached, refused = (trials[0].outcome.output or "").split(" | ")
    assert reached == "hello from the host"
    assert refused != reached and "hello" not in refused
