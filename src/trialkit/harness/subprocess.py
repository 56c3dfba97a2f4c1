"""`SubprocessAgent`: a command-line agent, run once per user turn in the trial's workspace.

```python
agent = SubprocessAgent(
    ["claude", "-p", "{input}", "--output-format", "stream-json", "--verbose",
     "--mcp-config", "{mcp_config}", "--allowed-tools", "mcp__trialkit"],
    tools=[write_note],                          # served over MCP, every call recorded
    continue_args=["--resume", "{session_id}"],  # added from the second turn on
    timeout=300,
)
suite = Suite(id="notes", harness=agent, environment=Workspace("fixtures/notes"), tasks=[...])
```

The command runs in the trial's workspace (`ctx.world.path`), or else in `cwd`, or else in a
fresh temporary folder. Placeholders in its arguments, replaced in one pass:

- `{input}`: the turn's message. Without it the message is the last argument, or goes to
  stdin with `stdin=True`.
- `{mcp_url}`: the URL of the MCP server serving `tools` (Streamable HTTP).
- `{mcp_config}`: a JSON file `{"mcpServers": {"trialkit": {"type": "http", "url": ...}}}`,
  written outside the workspace (it never shows in the diff); it holds the URL and nothing else.
- `{workspace}`: the folder the command runs in.
- `{session_id}`: the session id the previous turn's JSON output reported (for
  `continue_args`, e.g. `["--resume", "{session_id}"]`).

The environment is this process's, plus `env`, plus `TRIALKIT_WORKSPACE`, `TRIALKIT_TASK_ID`,
`TRIALKIT_TRIAL`, `TRIALKIT_TURN` (from 0) and, when tools are served, `TRIALKIT_MCP_URL`.

Output (`output=`): `"json"` is one JSON object (Claude Code's `--output-format json`; the answer
is its `result`, `output` or `text`); `"stream-json"` is one JSON event per line (Claude Code's
`--output-format stream-json`: assistant text, thinking and `tool_use` blocks, `tool_result`s
paired by id, a final `result`); `"text"` is the answer as printed; `"auto"` tells them apart.
The token usage and the cost (`total_cost_usd`) a JSON result reports go on the turn's reply and
count in the trial's usage and `cost_usd`.
Tool calls the agent reports are recorded as reported, in time order with the MCP server's,
except its calls of the tools trialkit serves (`mcp__trialkit__NAME`): the server recorded those
itself, and its record is the one that counts. A served tool that raises `GiveUp` makes the
turn a reported failure. Stdout is kept up to 10 MB, stderr's last 64 KB.

A non-zero exit is the agent reporting failure: the turn's reply has `is_error` and, as
`error`, the agent's JSON error or the last lines of its stderr. A command that cannot start
raises `AgentStartError`. A turn that outlives `timeout` raises `TimeoutError` (the trial is an
error, never a fail). On a timeout, a cancellation (the task's timeout) and after every turn,
the agent's whole process group is stopped: SIGTERM, a short grace, then SIGKILL, so nothing it
started keeps running, unless it left its process group (`setsid`). On Linux the agent also
gets SIGTERM if trialkit dies. POSIX only.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from trialkit._record import clean_text
from trialkit.harness._agent_output import AgentOutputError, Answer, Events, OutputFormat, interpret
from trialkit.harness._process import MAX_STDOUT_BYTES, AgentStartError, Finished, run_command
from trialkit.harness.base import Harness, Reply, Session, TrialContext
from trialkit.harness.mcp import SERVER_NAME
from trialkit.harness.tools import Tool
from trialkit.transcript import Message, ToolCall, TranscriptRecorder, current_recorder

__all__ = ["AgentOutputError", "AgentStartError", "OutputFormat", "SubprocessAgent"]

_MCP_PREFIX = f"mcp__{SERVER_NAME}__"
_PLACEHOLDER = re.compile(r"\{(input|mcp_url|mcp_config|workspace|session_id)\}")


class SubprocessAgent(Harness):
    """A command-line agent: `command` runs once per user turn (see the module docs).

    `command` is a list of arguments (a string is split like a shell would). `timeout` bounds
    each turn in seconds; without it the task's timeout bounds the trial. `tools` are served to
    the agent over MCP. `continue_args` are added to the command from the second turn on.
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        tools: Sequence[Callable[..., Any] | Tool] = (),
        output: OutputFormat = "auto",
        stdin: bool = False,
        continue_args: Sequence[str] = (),
        cwd: str | Path | None = None,
    ) -> None:
        if os.name != "posix":
            raise NotImplementedError("SubprocessAgent needs a POSIX system (process groups)")
        args = shlex.split(command) if isinstance(command, str) else list(command)
        if not args or not all(isinstance(a, str) for a in args):
            raise ValueError("command: expected a non-empty list of strings")
        if output not in ("auto", "json", "stream-json", "text"):
            raise ValueError(f"output must be auto, json, stream-json or text, got {output!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.command = args
        self.env = dict(env or {})
        self.timeout = timeout
        self.tools = [fn if isinstance(fn, Tool) else Tool(fn) for fn in tools]
        names = [tool.name for tool in self.tools]
        if len(set(names)) < len(names):
            raise ValueError(f"two tools have the same name: {names}")
        self.output: OutputFormat = output
        self.stdin = stdin
        self.continue_args = list(continue_args)
        self.cwd = Path(cwd) if cwd is not None else None
        self.name = os.path.basename(args[0])
        used = {m for a in [*args, *self.continue_args] for m in _PLACEHOLDER.findall(a)}
        if not self.tools and used & {"mcp_url", "mcp_config"}:
            raise ValueError("the command uses {mcp_url} or {mcp_config}, but no tools are served")
        if "session_id" in {m for a in args for m in _PLACEHOLDER.findall(a)}:
            raise ValueError("{session_id} belongs in continue_args: the first turn has none")
        if self.tools:
            from trialkit.harness.mcp import require_mcp

            require_mcp()

    async def session(self, ctx: TrialContext) -> Session:
        return _CommandSession(self, ctx)


class _CommandSession(Session):
    def __init__(self, agent: SubprocessAgent, ctx: TrialContext) -> None:
        self.agent = agent
        self.ctx = ctx
        self.recorder = current_recorder()
        self.turn = 0
        self.session_id: str | None = None
        self._owned: list[Path] = []
        world = getattr(ctx.world, "path", ctx.world)
        if isinstance(world, str | os.PathLike):
            self.cwd = Path(world)
        elif agent.cwd is not None:
            self.cwd = agent.cwd
        else:
            self.cwd = Path(tempfile.mkdtemp(prefix="trialkit-agent-"))
            self._owned.append(self.cwd)
        if not self.cwd.is_dir():
            raise AgentStartError(f"the agent's working folder {str(self.cwd)!r} is not a folder")
        self.mcp_config: Path | None = None
        if agent.tools:
            private = Path(tempfile.mkdtemp(prefix="trialkit-mcp-"))  # mode 0700
            self._owned.append(private)
            self.mcp_config = private / "mcp.json"

    async def send(self, message: str | list[Message]) -> Reply:
        turn, self.turn = self.turn, self.turn + 1
        text = _as_text(message)
        if not self.agent.tools:
            return await self._run_turn(turn, text, None)
        from trialkit.harness.mcp import ToolServer

        async with ToolServer(self.agent.tools, ctx=self.ctx, recorder=self.recorder) as server:
            reply = await self._run_turn(turn, text, server.url)
        if server.gave_up is not None:  # a tool ended the turn as a failure
            reply = reply.model_copy(update={"is_error": True, "error": server.gave_up})
        return reply

    async def close(self) -> None:
        for path in self._owned:
            await anyio.to_thread.run_sync(shutil.rmtree, path, True)

    async def _run_turn(self, turn: int, text: str, url: str | None) -> Reply:
        if url is not None and self.mcp_config is not None:
            _write_private(self.mcp_config, _mcp_config(url))
        events = Events(MAX_STDOUT_BYTES)
        finished = await run_command(
            self._argv(turn, text, url),
            cwd=self.cwd,
            env=self._env(turn, url),
            stdin=text.encode() if self.agent.stdin else None,
            time_limit=self.agent.timeout,
            on_line=None if self.agent.output == "text" else lambda s: events.feed(s, self._now()),
        )
        try:
            answer = interpret(self.agent.output, finished.stdout, events)
        except AgentOutputError:
            if finished.returncode == 0:
                raise
            answer = Answer()  # it failed before it could print what it promised
        self.session_id = answer.session_id or self.session_id
        return self._reply(answer, finished, served=url is not None)

    def _now(self) -> float | None:
        return self.recorder.elapsed() if self.recorder is not None else None

    def _argv(self, turn: int, text: str, url: str | None) -> list[str]:
        args = [*self.agent.command, *(self.agent.continue_args if turn > 0 else [])]
        values = {
            "input": text,
            "mcp_url": url or "",
            "mcp_config": str(self.mcp_config or ""),
            "workspace": str(self.cwd),
            "session_id": self.session_id or "",
        }
        if self.session_id is None and any("{session_id}" in a for a in args):
            raise AgentOutputError(
                f"turn {turn} needs {{session_id}}, but the agent's output so far reported none"
            )
        argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in args]
        if not self.agent.stdin and not any("{input}" in a for a in args):
            argv.append(text)
        return argv

    def _env(self, turn: int, url: str | None) -> dict[str, str]:
        env = {**os.environ, **self.agent.env}
        env.update(
            TRIALKIT_WORKSPACE=str(self.cwd),
            TRIALKIT_TASK_ID=self.ctx.task.id,
            TRIALKIT_TRIAL=str(self.ctx.trial_index),
            TRIALKIT_TURN=str(turn),
        )
        if url is not None:
            env["TRIALKIT_MCP_URL"] = url
            for key in ("NO_PROXY", "no_proxy"):  # a proxy must not intercept the loopback URL
                env[key] = ",".join(filter(None, [env.get(key), "127.0.0.1", "localhost"]))
        return env

    def _reply(self, answer: Answer, finished: Finished, *, served: bool) -> Reply:
        calls = [c for c in answer.calls if not (served and c.name.startswith(_MCP_PREFIX))]
        error = answer.error if answer.is_error else None
        if finished.returncode != 0:
            reason = _exit_reason(finished.returncode)
            detail = error or _last_lines(finished.stderr)
            error = f"{reason}: {detail}" if detail else reason
        messages = answer.messages
        if finished.dropped:
            note = f"[trialkit: the agent printed {finished.dropped} bytes over the limit of "
            messages = [*messages, Message(role="system", content=f"{note}{MAX_STDOUT_BYTES}]")]
        if self.recorder is not None:
            _record_in_order(self.recorder, calls)
            calls = []
        return Reply(
            output=clean_text(answer.output) if answer.output is not None else None,
            is_error=error is not None,
            error=clean_text(error) if error is not None else None,
            messages=messages,
            tool_calls=calls,
            reasoning=answer.reasoning,
            usage=answer.usage,
            cost_usd=answer.cost_usd,
        )


def _as_text(message: str | list[Message]) -> str:
    if isinstance(message, str):
        return message
    if len(message) == 1:
        return message[0].content
    return "\n\n".join(f"{m.role}: {m.content}" for m in message)


def _mcp_config(url: str) -> str:
    return json.dumps({"mcpServers": {SERVER_NAME: {"type": "http", "url": url}}}, indent=2)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def _record_in_order(recorder: TranscriptRecorder, calls: list[ToolCall]) -> None:
    """Add the agent's reported calls to the transcript, ordered by start time among this
    turn's calls (the MCP server recorded its own as they came)."""
    for call in calls:
        recorder.add_tool_call(call.model_copy())
    recorded = recorder.transcript.tool_calls
    start = len(recorded)
    while start > 0 and recorded[start - 1].turn == recorder.turn:
        start -= 1
    recorded[start:] = sorted(
        recorded[start:], key=lambda c: math.inf if c.started_at is None else c.started_at
    )


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"the agent was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"the agent was killed by signal {-returncode}"
    return f"the agent exited with code {returncode}"


def _last_lines(text: str, lines: int = 20, chars: int = 2000) -> str:
    tail = "\n".join(text.strip().splitlines()[-lines:])
    return tail[-chars:]
