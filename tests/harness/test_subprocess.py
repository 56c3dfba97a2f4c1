"""Command-line agents: `SubprocessAgent` runs a real process per turn and reads its output.

The agent is `tests/agents/fake_claude.py`, which prints what Claude Code's print mode prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from trialkit import GradeContext, Report, Suite, Task, TrialStatus, Turns, Verdict, graders
from trialkit import run_sync as run
from trialkit.environments.workspace import Workspace
from trialkit.harness._agent_output import Events, interpret
from trialkit.harness._process import MAX_STDOUT_BYTES, Stdout
from trialkit.harness.subprocess import AgentOutputError, SubprocessAgent
from trialkit.harness.tools import Tool
from trialkit.store import Store
from trialkit.transcript import Usage

FAKE = str(Path(__file__).parents[1] / "agents" / "fake_claude.py")


def fake(*args: str, **options: Any) -> SubprocessAgent:
    return SubprocessAgent([sys.executable, FAKE, *args], **options)


class Seen:
    """A grader that passes and keeps what it saw."""

    def __init__(self) -> None:
        self.contexts: list[GradeContext] = []

    def __call__(self, ctx: GradeContext) -> bool:
        self.contexts.append(ctx)
        return True

    @property
    def only(self) -> GradeContext:
        (ctx,) = self.contexts
        return ctx


def run_task(agent: SubprocessAgent, task: Task, **suite: Any) -> Report:
    return run(Suite(id="s", harness=agent, tasks=[task], **suite))


def gone(pid: int) -> bool:
    """The process ended: no such pid, or a zombie nobody reaped yet (PID 1 may not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def wait_gone(*pids: int, within: float = 10.0) -> list[int]:
    """The pids still running after `within` seconds (polled)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = [pid for pid in pids if not gone(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if not gone(pid)]


def test_the_public_names_stay_in_the_subprocess_module() -> None:
    import trialkit.harness.subprocess as module

    assert sorted(module.__all__) == [
        "AgentOutputError",
        "AgentStartError",
        "OutputFormat",
        "SubprocessAgent",
    ]
    assert all(hasattr(module, name) for name in module.__all__)


# -- reading output -----------------------------------------------------------------------------


def parse(stdout: str, mode: Any = "auto") -> Any:
    events = Events(MAX_STDOUT_BYTES)
    for line in stdout.split("\n"):
        events.feed(line, None)
    return interpret(mode, stdout, events)


CLAUDE_JSON = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "Paris.",
    "session_id": "abc",
    "usage": {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    },
    "total_cost_usd": 0.01,
}


def test_json_output_gives_the_answer_usage_and_session() -> None:
    answer = parse(json.dumps(CLAUDE_JSON))
    assert (answer.output, answer.is_error, answer.session_id) == ("Paris.", False, "abc")
    assert answer.usage == Usage(
        input_tokens=130, output_tokens=5, cache_read_tokens=100, cache_write_tokens=20
    )


def test_the_cost_the_agent_reports() -> None:
    assert parse(json.dumps(CLAUDE_JSON)).cost_usd == 0.01
    as_events = stream(assistant("m1", {"type": "text", "text": "hi"}), CLAUDE_JSON)
    assert parse(as_events, "stream-json").cost_usd == 0.01
    assert parse('{"result": "hi", "cost_usd": 2}').cost_usd == 2.0
    for bogus in (-1, "0.5", True, None):
        assert parse(json.dumps({"result": "hi", "total_cost_usd": bogus})).cost_usd is None
    assert parse("plain words").cost_usd is None


def test_json_errors_and_other_answer_fields() -> None:
    failed = parse(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True}))
    assert (failed.is_error, failed.error, failed.output) == (True, "error_max_turns", None)
    assert parse('{"output": "hi"}').output == "hi"
    assert parse('{"text": "hi", "usage": {"prompt_tokens": 7}}').usage == Usage(input_tokens=7)
    crashed = parse('{"error": {"message": "rate limited"}}')
    assert (crashed.is_error, crashed.error) == (True, "rate limited")
    # A JSON answer without an answer field is the answer itself.
    assert parse('{"city": "Paris"}').output == '{"city": "Paris"}'
    assert parse('{"city": "Paris"}', "text").output == '{"city": "Paris"}'
    assert parse('starting\n{"result": "ok"}', "json").output == "ok"
    with pytest.raises(AgentOutputError, match="expected a JSON object"):
        parse("just words", "json")


def stream(*events: dict[str, Any]) -> str:
    return "\n".join(json.dumps(e) for e in events) + "\n"


def assistant(message_id: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    usage = {"input_tokens": 3, "output_tokens": 2}
    return {"type": "assistant", "message": {"id": message_id, "content": blocks, "usage": usage}}


def results(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": list(blocks)}}


def test_stream_json_pairs_tool_calls_with_results() -> None:
    answer = parse(
        stream(
            {"type": "system", "subtype": "init", "session_id": "s1"},
            assistant("m1", {"type": "thinking", "thinking": "look first"}),
            assistant("m1", {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}}),
            assistant("m1", {"type": "tool_use", "id": "t2", "name": "Bash", "input": "ls"}),
            results(
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "a"}],
                },
                {"type": "tool_result", "tool_use_id": "t1", "content": "no", "is_error": True},
            ),
            assistant("m2", {"type": "text", "text": "Done."}),
            {"type": "result", "subtype": "success", "result": "Done.", "session_id": "s1"},
        )
    )
    assert answer.output == "Done."
    assert answer.session_id == "s1"
    assert answer.reasoning == ["look first"]
    assert [(c.id, c.name, c.arguments, c.result, c.is_error) for c in answer.calls] == [
        ("t1", "Read", {"p": "a"}, "no", True),
        ("t2", "Bash", {"input": "ls"}, "a", False),
    ]
    assert [(m.role, m.content, m.tool_call_id) for m in answer.messages] == [
        ("assistant", "", None),
        ("tool", "a", "t2"),
        ("tool", "no", "t1"),
        ("assistant", "Done.", None),
    ]
    assert [c.id for c in answer.messages[0].tool_calls] == ["t1", "t2"]
    # Without usage in the result, each message counts once, however many blocks it has.
    assert answer.usage == Usage(input_tokens=6, output_tokens=4)


def test_stream_json_without_a_result_and_other_shapes() -> None:
    cut_short = parse(stream(assistant("m1", {"type": "text", "text": "partial"})))
    assert (cut_short.output, cut_short.is_error) == ("partial", False)
    as_list = parse(json.dumps([assistant("m1", {"type": "text", "text": "hi"}), CLAUDE_JSON]))
    assert (as_list.output, as_list.session_id) == ("Paris.", "abc")
    assert [m.content for m in as_list.messages] == ["hi"]
    records = '{"id": 1}\n{"id": 2}'
    assert parse(records).output == records  # JSON lines, but not events: the answer itself
    assert parse('[{"id": 1}]').output == '[{"id": 1}]'
    mixed = 'Thinking...\n{"type": "result", "result": "x"}\n'
    assert parse(mixed).output == mixed.strip()  # auto: not all JSON, so text
    assert parse(mixed, "stream-json").output == "x"
    with pytest.raises(AgentOutputError, match="expected JSON events"):
        parse("no json at all", "stream-json")
    assert parse("", "json").output is None


def test_stdout_is_capped_and_cut_into_lines() -> None:
    lines: list[str] = []
    out = Stdout(10, lines.append)
    out.feed(b"one\ntw")
    out.feed(b"o\n" + b"x" * 25 + b"\nthree")
    out.flush()
    assert bytes(out.kept) == b"one\ntwo\nxx"
    assert out.dropped == len(b"one\ntwo\n" + b"x" * 25 + b"\nthree") - 10
    assert lines == ["one", "two", "three"]  # the line over the limit is dropped


# -- running agents -----------------------------------------------------------------------------


def test_a_stream_json_agent_with_its_own_tool_calls() -> None:
    seen = Seen()
    agent = fake("--output-format", "stream-json")
    report = run_task(
        agent,
        Task(
            id="t",
            input="think first\nwrite a.txt hello\nsay done",
            graders=[
                graders.tool_called("Write", {"path": "a.txt"}),
                graders.file_exists("a.txt"),
                seen,
            ],
        ),
        environment=Workspace(keep="none"),
    )
    assert report.tasks[0].verdict == "pass", report.tasks[0].results
    transcript = seen.only.transcript
    (write,) = transcript.tool_calls
    assert (write.id, write.result, write.is_error, write.turn) == (
        "toolu_2",
        "wrote a.txt",
        False,
        0,
    )
    assert write.started_at is not None and write.duration_s is not None
    assert [r.content for r in transcript.reasoning] == ["first"]
    assert [m.role for m in transcript.messages] == ["user", "assistant", "tool", "assistant"]
    assert transcript.turns[0].output == "done"
    assert transcript.usage == Usage(
        input_tokens=130, output_tokens=5, cache_read_tokens=100, cache_write_tokens=20
    )
    assert seen.only.outcome.diff is not None
    assert [f.path for f in seen.only.outcome.diff.files] == ["a.txt"]


def test_json_output_in_a_workspace_with_the_trial_environment() -> None:
    seen = Seen()
    agent = fake("--output-format", "json", "{input}", env={"FAKE_COLOUR": "blue"})
    run_task(agent, Task(id="env", input="env", graders=[seen]), environment=Workspace(keep="none"))
    told = json.loads(seen.only.outcome.output or "")
    workspace = str(seen.only.world.path)
    assert told["cwd"] == os.path.realpath(workspace)
    assert told["argv"] == ["--output-format", "json", "env"]
    # what the agent got on top of the environment trialkit itself runs in
    added = {k: v for k, v in told["env"].items() if os.environ.get(k) != v}
    proxy = re.compile(r"http://127\.0\.0\.1:\d+/trialkit/[\w-]{24}/")
    assert proxy.match(added.pop("TRIALKIT_ANTHROPIC_BASE_URL", ""))  # the model proxy's URLs
    assert proxy.match(added.pop("TRIALKIT_OPENAI_BASE_URL", ""))
    assert added == {
        "FAKE_COLOUR": "blue",
        "TRIALKIT_WORKSPACE": workspace,
        "TRIALKIT_TASK_ID": "env",
        "TRIALKIT_TRIAL": "0",
        "TRIALKIT_TURN": "0",
    }


def test_plain_text_from_stdin_without_a_workspace(tmp_path: Path) -> None:
    seen = Seen()
    report = run_task(fake(stdin=True), Task(id="t", input="say hello there", graders=[seen]))
    assert report.tasks[0].results[0].output == "hello there"
    assert seen.only.transcript.tool_calls == []
    # Without a workspace the agent ran in a temporary folder, removed after the trial.
    seen = Seen()
    run_task(fake(), Task(id="t", input="env", graders=[seen]))
    folder = json.loads(seen.only.outcome.output or "")["cwd"]
    assert "trialkit-agent-" in folder and not os.path.exists(folder)
    seen = Seen()
    run_task(fake(cwd=tmp_path), Task(id="t", input="env", graders=[seen]))
    assert json.loads(seen.only.outcome.output or "")["cwd"] == os.path.realpath(tmp_path)


def test_a_non_zero_exit_is_a_failure_and_passes_when_expected() -> None:
    failing = Task(id="t", input="fail boom", graders=[graders.contains("anything")])
    report = run_task(fake(), failing)
    (result,) = report.tasks[0].results
    assert result.verdict == Verdict.FAIL and result.status == TrialStatus.COMPLETED
    completed = next(s for s in result.scores if s.name == "agent_completed")
    assert completed.rationale == (
        "the agent reported failure: the agent exited with code 3: warming up\nfatal: boom"
    )
    # With JSON output the agent's own error wins over its stderr.
    report = run_task(fake("--output-format", "json"), failing)
    completed = next(s for s in report.tasks[0].results[0].scores if s.name == "agent_completed")
    assert completed.rationale == "the agent reported failure: the agent exited with code 3: boom"

    expected = Task(id="t", input="fail boom", expect="failure")
    assert run_task(fake(), expected).tasks[0].verdict == "pass"


def test_a_crash_before_the_promised_json_is_still_a_failure() -> None:
    report = run_task(fake(output="json"), Task(id="t", input="crash out of memory"))
    (result,) = report.tasks[0].results
    assert result.status == TrialStatus.COMPLETED and result.verdict == Verdict.FAIL
    assert result.scores[0].rationale == (
        "the agent reported failure: the agent exited with code 1: out of memory"
    )


def test_a_command_that_cannot_start_is_an_error() -> None:
    agent = SubprocessAgent(["trialkit-no-such-agent", "--json"])
    (result,) = run_task(agent, Task(id="t", input="hi")).tasks[0].results
    assert result.verdict == Verdict.ERROR and result.status == TrialStatus.ERROR
    assert result.error is not None and result.error.type == "AgentStartError"
    assert result.error.message == (
        "cannot start the agent command 'trialkit-no-such-agent': No such file or directory "
        "(is it installed and on PATH?)"
    )
    (result,) = run_task(fake(), Task(id="t", input="say " + "x" * 200_000)).tasks[0].results
    assert result.error is not None and result.error.type == "AgentStartError"
    assert result.error.message.endswith("(the input is too long for an argument: use stdin=True)")


def test_a_turn_timeout_stops_the_agent_and_what_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent = fake(timeout=1, env={"PIDS_FILE": str(pids)})
    (result,) = run_task(agent, Task(id="t", input="hang", timeout=30)).tasks[0].results
    assert result.status == TrialStatus.ERROR and result.verdict == Verdict.ERROR
    assert result.error is not None and result.error.type == "TimeoutError"
    assert "did not finish the turn within 1 s" in result.error.message
    agent_pid, grandchild = map(int, pids.read_text().split())
    assert wait_gone(agent_pid, grandchild) == []


def test_the_task_timeout_stops_an_agent_that_ignores_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent = fake(env={"PIDS_FILE": str(pids)})
    (result,) = run_task(agent, Task(id="t", input="hang stubborn", timeout=1)).tasks[0].results
    assert result.status == TrialStatus.TIMEOUT and result.verdict == Verdict.ERROR
    agent_pid, grandchild = map(int, pids.read_text().split())
    assert wait_gone(agent_pid, grandchild) == []


RUNNER = """
import sys, anyio
from trialkit import Task
from trialkit.harness.base import TrialContext
from trialkit.harness.subprocess import SubprocessAgent

async def main():
    agent = SubprocessAgent(
        [sys.executable, sys.argv[1]], env={"PIDS_FILE": sys.argv[2]}, cwd=sys.argv[3]
    )
    session = await agent.session(TrialContext(task=Task(id="t", input="x"), trial_index=0))
    await session.send("hang")

anyio.run(main)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_on_linux_the_agent_dies_with_trialkit(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, FAKE, str(pids), str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            assert runner.poll() is None, "the runner ended early"
            time.sleep(0.05)
        agent_pid = int(pids.read_text().split()[0])
        runner.kill()  # no cleanup code runs: only the kernel can stop the agent now
        runner.wait()
        assert wait_gone(agent_pid) == []
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
        if pids.exists():  # what the agent started is beyond PDEATHSIG's reach
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pids.read_text().split()[1]), signal.SIGKILL)


def test_what_the_agent_leaves_running_is_stopped_after_its_turn(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent = fake(env={"PIDS_FILE": str(pids)})
    # The sleep it left holds stdout open; waiting for the pipe to close would time out.
    (result,) = run_task(agent, Task(id="t", input="background", timeout=30)).tasks[0].results
    assert result.output == "left something running"
    assert wait_gone(int(pids.read_text())) == []


def test_later_turns_continue_the_session() -> None:
    seen = Seen()
    agent = fake("--output-format", "json", continue_args=["--resume", "{session_id}"])
    run_task(agent, Task(id="t", input=Turns("say one", "env"), graders=[seen]))
    turns = seen.only.transcript.turns
    assert turns[0].output == "one"
    told = json.loads((turns[1].output or "").split(" (resumed")[0])
    assert told["argv"] == ["--output-format", "json", "--resume", "sess-t-0", "env"]
    assert told["env"]["TRIALKIT_TURN"] == "1"


def test_the_agents_own_cost_is_the_trials_cost(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    for output in ("json", "stream-json"):
        report = run(
            Suite(
                id="s",
                harness=fake("--output-format", output),
                tasks=[Task(id="t", input="say hi")],
            ),
            store=url,
        )
        (result,) = report.tasks[0].results
        assert (result.cost_usd, result.grader_cost_usd) == (0.0123, 0.0)
        assert report.tasks[0].cost_usd == report.summary.cost_usd == 0.0123
        stored = Store(url)
        try:
            trial = stored.load_trial(report.run.id, "t", 0)
        finally:
            stored.close()
        assert trial.cost_usd == 0.0123
        assert [turn.cost_usd for turn in trial.transcript.turns] == [0.0123]
    # Each turn's cost adds up; an agent that reports none costs what is unknown.
    agent = fake("--output-format", "json", continue_args=["--resume", "{session_id}"])
    report = run_task(agent, Task(id="t", input=Turns("say one", "say two")))
    assert report.tasks[0].results[0].cost_usd == 0.0246
    assert run_task(fake(), Task(id="t", input="say hi")).tasks[0].cost_usd is None


def test_a_session_id_that_never_came_is_an_error() -> None:
    agent = fake(continue_args=["--resume", "{session_id}"])  # text output: no session id
    (result,) = run_task(agent, Task(id="t", input=Turns("say one", "say two"))).tasks[0].results
    assert result.error is not None and result.error.type == "AgentOutputError"
    assert "turn 1 needs {session_id}" in result.error.message


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(ValueError, match="no tools are served"):
        SubprocessAgent(["agent", "--mcp-config", "{mcp_config}"])
    with pytest.raises(ValueError, match="belongs in continue_args"):
        SubprocessAgent(["agent", "--resume", "{session_id}"])
    with pytest.raises(ValueError, match="output must be"):
        SubprocessAgent(["agent"], output="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty list"):
        SubprocessAgent([])
    with pytest.raises(ValueError, match="same name"):
        SubprocessAgent(["agent"], tools=[shout, Tool(shout)])
    assert SubprocessAgent("my-agent --flag 'two words'").command == [
        "my-agent",
        "--flag",
        "two words",
    ]


def test_a_broken_harness_or_a_timeout_is_never_the_expected_failure(tmp_path: Path) -> None:
    refuse = Task(id="t", input="hi", expect="failure")
    (result,) = run_task(SubprocessAgent(["trialkit-no-such-agent"]), refuse).tasks[0].results
    assert result.verdict == Verdict.ERROR
    assert result.error is not None and result.error.type == "AgentStartError"

    agent = fake(timeout=1, env={"PIDS_FILE": str(tmp_path / "pids")})
    hang = Task(id="t", input="hang", expect="failure", timeout=30)
    (result,) = run_task(agent, hang).tasks[0].results
    assert result.verdict == Verdict.ERROR
    assert result.error is not None and result.error.type == "TimeoutError"


# -- Codex's `exec --json` events ---------------------------------------------------------------

CODEX_EVENTS = [
    {"type": "thread.started", "thread_id": "th-1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "look first"}},
    {
        "type": "item.started",
        "item": {"id": "i1", "type": "command_execution", "command": "ls", "status": "in_progress"},
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i1",
            "type": "command_execution",
            "command": "ls",
            "aggregated_output": "notes.md\n",
            "exit_code": 0,
            "status": "completed",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i2",
            "type": "command_execution",
            "command": "cat missing",
            "aggregated_output": "No such file",
            "exit_code": 1,
            "status": "failed",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i3",
            "type": "mcp_tool_call",
            "server": "trialkit",
            "tool": "save_note",
            "arguments": {"name": "a.md"},
            "result": {"content": [{"type": "text", "text": "saved"}]},
            "status": "completed",
        },
    },
    {"type": "item.completed", "item": {"id": "i4", "type": "agent_message", "text": "Done."}},
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 120, "cached_input_tokens": 100, "output_tokens": 7},
    },
]


def test_codex_events_give_the_answer_calls_reasoning_usage_and_thread() -> None:
    answer = parse("\n".join(json.dumps(e) for e in CODEX_EVENTS))
    assert (answer.output, answer.is_error, answer.session_id) == ("Done.", False, "th-1")
    assert answer.reasoning == ["look first"]
    assert [(c.name, c.arguments, c.result, c.is_error) for c in answer.calls] == [
        ("command_execution", {"command": "ls"}, "notes.md\n", False),
        ("command_execution", {"command": "cat missing"}, "No such file", True),
        ("mcp__trialkit__save_note", {"name": "a.md"}, "saved", False),
    ]
    assert answer.usage == Usage(input_tokens=120, output_tokens=7, cache_read_tokens=100)
    assert [m.role for m in answer.messages] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


def test_a_failed_codex_turn_is_the_agent_reporting_failure() -> None:
    events = [
        {"type": "thread.started", "thread_id": "th-2"},
        {"type": "turn.started"},
        {"type": "error", "message": "usage limit reached"},
        {"type": "turn.failed", "error": {"message": "usage limit reached"}},
    ]
    answer = parse("\n".join(json.dumps(e) for e in events))
    assert (answer.is_error, answer.error, answer.output) == (True, "usage limit reached", None)


def test_a_codex_style_agent_in_a_workspace_is_graded_on_its_calls(tmp_path: Path) -> None:
    script = tmp_path / "codex_like.py"
    script.write_text(
        "import json, pathlib, sys\n"
        "pathlib.Path('done.txt').write_text(sys.argv[-1])\n"
        f"for event in {CODEX_EVENTS!r}:\n"
        "    print(json.dumps(event), flush=True)\n"
    )
    seen = Seen()
    task = Task(
        id="codex",
        input="go",
        graders=[
            graders.tool_called("command_execution", {"command": "ls"}),
            graders.file_exists("done.txt"),
            graders.contains("Done."),
            seen,
        ],
    )
    report = run_task(
        SubprocessAgent([sys.executable, str(script)]), task, environment=Workspace(keep="none")
    )
    assert report.tasks[0].verdict == "pass", report.tasks[0].results
    transcript = seen.only.transcript
    # no tools were served here, so the agent's own report of its MCP call is all there is
    assert [c.name for c in transcript.tool_calls] == [
        "command_execution",
        "command_execution",
        "mcp__trialkit__save_note",
    ]
    assert transcript.usage.input_tokens == 120
