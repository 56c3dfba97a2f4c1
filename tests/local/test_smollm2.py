"""The real path: SmolLM2 served by llama.cpp, called through the official OpenAI SDK.

These tests need the `local` extra and the weights (`.ci/run` installs both, then runs
`pytest -m local`); the default test run deselects them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from trialkit import Message, Suite, Task, graders, run_sync
from trialkit.models import ForceTool, GenerationConfig, ModelRequest, ToolSpec, get_model
from trialkit.models.local import LocalModel

pytestmark = pytest.mark.local

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart" / "evals.py"


def servers_marked(mark: str) -> list[int]:
    """Pids of live processes whose environment carries `mark` (our llama.cpp servers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if mark.encode() in environ and b"llama_cpp.server" in cmdline:
            found.append(int(proc.name))
    return found


def wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def test_answers_parse_usage_is_recorded_and_the_server_stops() -> None:
    local = LocalModel("smollm2")
    pids: list[int] = []

    def server_pid(ctx: object) -> bool:
        assert local.server is not None and local.server.process is not None
        pids.append(local.server.process.pid)
        return True

    suite = Suite(
        id="real",
        kind="regression",
        model=local,
        trials=2,
        config=GenerationConfig(temperature=0, max_tokens=32),
        tasks=[
            Task(
                id="france",
                input="What is the capital of France? Answer in one short sentence.",
                graders=[graders.contains("paris"), server_pid],
            )
        ],
    )
    report = run_sync(suite)
    result = report.tasks[0].results[0]
    assert report.tasks[0].verdict == "pass", result.output
    assert result.usage.input_tokens > 10 and result.usage.output_tokens > 0
    assert result.cost_usd == 0.0
    assert report.run.config["model"] == "local/smollm2"
    assert len(set(pids)) == 1  # one server for the whole run
    assert local.server is None or not local.server.running
    assert not Path(f"/proc/{pids[0]}").exists() or wait_until(
        lambda: not Path(f"/proc/{pids[0]}").exists(), 10
    )


def test_a_forced_tool_call_round_trips() -> None:
    weather = ToolSpec(
        name="get_weather",
        description="Get the current weather for a city.",
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )

    async def main() -> tuple[ModelRequest, str]:
        model = get_model("local/smollm2")
        try:
            ask = ModelRequest(
                messages=[Message(role="user", content="What is the weather in Paris?")],
                tools=[weather],
                tool_choice=ForceTool(name="get_weather"),
                config=GenerationConfig(temperature=0, max_tokens=64),
            )
            first = await model.generate(ask)
            (call,) = first.tool_calls
            assert call.name == "get_weather"
            assert "paris" in str(call.arguments.get("city", "")).lower()
            follow = ModelRequest(
                messages=[
                    *ask.messages,
                    first.message,
                    Message(
                        role="tool",
                        tool_call_id=call.id,
                        name=call.name,
                        content='{"city": "Paris", "forecast": "sunny, 21 °C"}',
                    ),
                ],
                tools=[weather],
                config=GenerationConfig(temperature=0, max_tokens=48),
            )
            second = await model.generate(follow)
            return follow, second.text
        finally:
            await model.aclose()

    follow, text = anyio.run(main)
    assert follow.messages[1].tool_calls[0].name == "get_weather"
    assert text.strip()


def test_the_quickstart_runs_live() -> None:
    env = {**os.environ, "TRIALKIT_STORE": ":memory:"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "trialkit",
            "run",
            f"{QUICKSTART}:regression",
            "--quiet",
            "--store",
            "sqlite://",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("4/4 tasks passed")


SLOW_SUITE = """
from trialkit import Suite, Task
from trialkit.models import GenerationConfig
suite = Suite(id="slow", model="local/smollm2", trials=40,
              config=GenerationConfig(temperature=0.9, max_tokens=200),
              tasks=[Task(id="story", input="Write a long story about a dragon.")])
"""


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_the_server_is_gone_after_an_interrupt(tmp_path: Path, how: signal.Signals) -> None:
    (tmp_path / "slow.py").write_text(SLOW_SUITE)
    mark = f"TRIALKIT_TEST_{os.getpid()}_{how.name}"
    env = {**os.environ, mark: "1", "TRIALKIT_STORE": str(tmp_path / "store.db")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trialkit", "run", "slow.py", "--no-progress", "--concurrency", "2"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(lambda: servers_marked(mark), 60), "the server never started"
        time.sleep(1.0)  # let it answer a little
        proc.send_signal(how)
        proc.communicate(timeout=60)
        if how is signal.SIGINT:
            assert proc.returncode == 130
        assert wait_until(lambda: not servers_marked(mark), 15), servers_marked(mark)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in servers_marked(mark):
            os.kill(pid, signal.SIGKILL)
