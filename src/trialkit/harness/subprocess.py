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

import contextlib
import errno
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO, Any, Literal

import anyio
import anyio.to_thread

from trialkit._record import clean_text
from trialkit.harness.base import Harness, HarnessError, Reply, Session, TrialContext
from trialkit.harness.mcp import SERVER_NAME
from trialkit.harness.tools import Tool
from trialkit.transcript import Message, ToolCall, TranscriptRecorder, Usage, current_recorder

__all__ = ["AgentOutputError", "AgentStartError", "OutputFormat", "SubprocessAgent"]

OutputFormat = Literal["auto", "json", "stream-json", "text"]

MAX_STDOUT_BYTES = 10_000_000
"""Stdout kept per turn; the rest is read and dropped, and the transcript says so."""
MAX_STDERR_BYTES = 64_000
"""The tail of stderr kept per turn, for the error of a failed turn."""
GRACE_S = 2.0
"""Between SIGTERM and SIGKILL when stopping the agent's process group."""
_DRAIN_S = 1.0
"""How long to go on reading after the agent exited, for output still in the pipes."""
_POLL_S = 0.02
_MCP_PREFIX = f"mcp__{SERVER_NAME}__"
_EVENT_TYPES = ("system", "assistant", "user", "result")
_PLACEHOLDER = re.compile(r"\{(input|mcp_url|mcp_config|workspace|session_id)\}")


class AgentStartError(HarnessError):
    """The agent's command could not be started (not found, not executable)."""


class AgentOutputError(HarnessError, ValueError):
    """The agent's output is not in the format the harness was told to expect."""


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
        events = _Events(MAX_STDOUT_BYTES)
        finished = await _run(
            self._argv(turn, text, url),
            cwd=self.cwd,
            env=self._env(turn, url),
            stdin=text.encode() if self.agent.stdin else None,
            time_limit=self.agent.timeout,
            on_line=None if self.agent.output == "text" else lambda s: events.feed(s, self._now()),
        )
        try:
            answer = _interpret(self.agent.output, finished.stdout, events)
        except AgentOutputError:
            if finished.returncode == 0:
                raise
            answer = _Answer()  # it failed before it could print what it promised
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

    def _reply(self, answer: _Answer, finished: _Finished, *, served: bool) -> Reply:
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


# -- running the command ------------------------------------------------------------------------


@dataclass
class _Finished:
    returncode: int
    stdout: str
    stderr: str
    dropped: int
    """Bytes of stdout over `MAX_STDOUT_BYTES`, read and not kept."""


async def _run(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: bytes | None,
    time_limit: float | None,
    on_line: Callable[[str], None] | None,
) -> _Finished:
    """Run the command to its end; its process group is gone when this returns or raises."""
    process = _spawn(argv, cwd, env, with_stdin=stdin is not None)
    out = _Stdout(MAX_STDOUT_BYTES, on_line)
    err = bytearray()

    def keep_tail(chunk: bytes) -> None:
        err.extend(chunk)
        del err[:-MAX_STDERR_BYTES]

    try:
        with anyio.move_on_after(math.inf if time_limit is None else time_limit) as deadline:
            async with anyio.create_task_group() as pipes:
                assert process.stdout is not None and process.stderr is not None
                pipes.start_soon(_pump, process.stdout, out.feed)
                pipes.start_soon(_pump, process.stderr, keep_tail)
                if stdin is not None:
                    assert process.stdin is not None
                    pipes.start_soon(_write, process.stdin, stdin)
                await _wait_exit(process)
                # What it left in the background may hold the pipes open: stop it, then give
                # the readers a moment for the output still buffered.
                await _stop_group(process)
                pipes.cancel_scope.deadline = anyio.current_time() + _DRAIN_S
    finally:
        with anyio.CancelScope(shield=True):
            await _stop_group(process)
            await _reap(process)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
    if deadline.cancelled_caught:
        raise TimeoutError(
            f"the agent {argv[0]!r} did not finish the turn within {time_limit:g} s; it was stopped"
        )
    out.flush()
    return _Finished(
        returncode=-signal.SIGKILL if process.returncode is None else process.returncode,
        stdout=out.kept.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        dropped=out.dropped,
    )


def _spawn(
    argv: list[str], cwd: Path, env: dict[str, str], *, with_stdin: bool
) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group, so it can be stopped as a whole
            preexec_fn=_parent_death_signal(),
        )
    except OSError as exc:
        hint = ""
        if isinstance(exc, FileNotFoundError):
            hint = " (is it installed and on PATH?)"
        elif exc.errno == errno.E2BIG:
            hint = " (the input is too long for an argument: use stdin=True)"
        raise AgentStartError(
            f"cannot start the agent command {argv[0]!r}: {exc.strerror or exc}{hint}"
        ) from exc


@cache
def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, what the child runs before exec so the kernel sends it SIGTERM when the
    thread that started it (the event loop's) ends, even if trialkit is killed outright."""
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        # Looked up here, in the parent: the forked child of a threaded process should do as
        # little as possible before exec.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:  # pragma: no cover - runs in the child
        prctl(pr_set_pdeathsig, signal.SIGTERM)

    return die_with_parent


async def _pump(stream: IO[bytes], feed: Callable[[bytes], None]) -> None:
    fd = stream.fileno()
    os.set_blocking(fd, False)
    while True:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            return
        feed(chunk)


async def _write(stream: IO[bytes], data: bytes) -> None:
    fd = stream.fileno()
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            await anyio.wait_writable(fd)
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
    except BrokenPipeError:
        pass  # the agent does not read its input; that is its business
    finally:
        stream.close()


_PROC = sys.platform.startswith("linux") and os.path.isdir("/proc")
"""Whether processes can be listed through /proc (to tell a live process from a zombie)."""


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the agent ended. With /proc it is not reaped yet: while it is a zombie its pid,
    the id of its process group, cannot go to another process that `killpg` would then hit."""
    if process.returncode is not None:
        return True
    if not _PROC:
        return process.poll() is not None
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


async def _wait_exit(process: subprocess.Popen[bytes]) -> None:
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: poll
        delay = 0.005
        while not _exited(process):
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.1)
        return
    try:
        while not _exited(process):
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the agent and every process left in its group: SIGTERM, `GRACE_S`, SIGKILL."""
    group = process.pid  # the leader of its own session, so the id of its group

    def running() -> bool:
        return not _exited(process) or _group_alive(group)

    if not running():
        return
    for sig, patience in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
        with anyio.move_on_after(patience):
            # Polled: the group's other processes are not our children, nothing signals their end.
            while running():  # noqa: ASYNC110
                await anyio.sleep(_POLL_S)
        if not running():
            return


async def _reap(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:  # only when even SIGKILL has not ended it yet
        with anyio.move_on_after(5.0):
            await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)


def _group_alive(group: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: an orphan's zombie
    waits for whatever reaps orphans here (PID 1 in some containers never does)."""
    if not _PROC:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group).encode() and fields[0] != b"Z":
            return True
    return False


class _Stdout:
    """Stdout as it arrives: kept up to `limit` bytes, and handed over line by line."""

    def __init__(self, limit: int, on_line: Callable[[str], None] | None) -> None:
        self.limit = limit
        self.on_line = on_line
        self.kept = bytearray()
        self.dropped = 0
        self._line = bytearray()
        self._too_long = False

    def feed(self, chunk: bytes) -> None:
        room = max(self.limit - len(self.kept), 0)
        self.kept += chunk[:room]
        self.dropped += max(len(chunk) - room, 0)
        if self.on_line is None:
            return
        lines = chunk.split(b"\n")
        for part in lines[:-1]:
            self._add(part)
            if not self._too_long:
                self.on_line(self._line.decode("utf-8", "replace"))
            self._line.clear()
            self._too_long = False
        self._add(lines[-1])

    def _add(self, part: bytes) -> None:
        if len(self._line) + len(part) > self.limit:  # one line over the limit: dropped
            self._too_long = True
            self._line.clear()
        elif not self._too_long:
            self._line += part

    def flush(self) -> None:
        if self.on_line is not None and self._line and not self._too_long:
            self.on_line(self._line.decode("utf-8", "replace"))
        self._line.clear()


# -- reading the output -------------------------------------------------------------------------


@dataclass
class _Answer:
    output: str | None = None
    is_error: bool = False
    error: str | None = None
    messages: list[Message] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    session_id: str | None = None


def _interpret(mode: OutputFormat, stdout: str, events: _Events) -> _Answer:
    printed = stdout.strip()
    if mode == "text" or not printed:
        return _Answer(output=printed or None)
    if mode == "stream-json":
        if not events.count:
            raise AgentOutputError(f"expected JSON events, one a line; got {_excerpt(printed)}")
        return events.answer()
    whole = _loads(printed)
    if isinstance(whole, list) and any(_is_event(e) for e in whole):
        replay = _Events(MAX_STDOUT_BYTES)  # Claude Code's `--output-format json --verbose`
        for event in whole:
            replay.feed(json.dumps(event), None)
        return replay.answer()
    if _is_event(whole) and whole.get("type") != "result":
        return events.answer()  # a stream of one event, cut short
    if not isinstance(whole, dict) and mode == "auto":
        if events.typed and not events.bad_lines:
            return events.answer()
        return _Answer(output=printed)
    if not isinstance(whole, dict):
        whole = _loads(printed.rsplit("\n", 1)[-1])  # logs first, then the JSON
        if not isinstance(whole, dict):
            raise AgentOutputError(f"expected a JSON object; got {_excerpt(printed)}")
    answer = _from_result(whole)
    if answer.output is None and not answer.is_error:
        answer.output = printed  # JSON without an answer field is the answer itself
    return answer


def _is_event(value: object) -> bool:
    return isinstance(value, dict) and value.get("type") in _EVENT_TYPES


class _Events:
    """Stream-JSON events (Claude Code's shape), folded into messages, tool calls and an
    answer. After `limit` bytes only the final `result` and session ids are still read."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.count = 0
        self.typed = 0
        """Events of the types this reads (others are counted, not read)."""
        self.bad_lines = 0
        self.messages: list[Message] = []
        self.calls: dict[str, ToolCall] = {}
        self.reasoning: list[str] = []
        self.result: dict[str, Any] | None = None
        self.session_id: str | None = None
        self._usage: dict[str, Usage] = {}
        self._message_id: str | None = None

    def feed(self, line: str, at: float | None) -> None:
        if not line.strip():
            return
        event = _loads(line)
        if not isinstance(event, dict):
            self.bad_lines += 1
            return
        self.count += 1
        self.typed += _is_event(event)
        self.session_id = _str(event.get("session_id")) or self.session_id
        if event.get("type") == "result":
            self.result = event
            return
        self.size += len(line)
        message = event.get("message")
        if self.size > self.limit or not isinstance(message, dict):
            return
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if event.get("type") == "assistant":
            self._assistant(message, blocks, at)
        elif event.get("type") == "user":
            self._tool_results(blocks, at)

    def _assistant(
        self, message: dict[str, Any], blocks: list[dict[str, Any]], at: float | None
    ) -> None:
        message_id = _str(message.get("id"))
        usage = _usage(message.get("usage"))
        if message_id is not None and usage is not None:
            self._usage[message_id] = usage  # repeated on every block of the message
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                self.reasoning.append(block["thinking"])
            elif kind == "tool_use":
                arguments = block.get("input")
                call = ToolCall(
                    id=_str(block.get("id")) or f"call_{len(self.calls) + 1}",
                    name=_str(block.get("name")) or "unknown",
                    arguments=arguments if isinstance(arguments, dict) else {"input": arguments},
                    started_at=at,
                )
                self.calls[call.id] = call
                calls.append(call)
        if not texts and not calls:
            return
        last = self.messages[-1] if self.messages else None
        if last is None or last.role != "assistant" or message_id != self._message_id:
            last = Message(role="assistant")
            self.messages.append(last)
            self._message_id = message_id
        last.content = "\n".join(filter(None, [last.content, *texts]))
        last.tool_calls.extend(calls)

    def _tool_results(self, blocks: list[dict[str, Any]], at: float | None) -> None:
        for block in blocks:
            if block.get("type") != "tool_result":
                continue
            call_id = _str(block.get("tool_use_id"))
            text = _content_text(block.get("content"))
            call = self.calls.get(call_id or "")
            if call is not None:
                call.result, call.is_error = text, block.get("is_error") is True
                if at is not None and call.started_at is not None:
                    call.duration_s = at - call.started_at
            self.messages.append(
                Message(
                    role="tool",
                    content=text,
                    name=call.name if call is not None else None,
                    tool_call_id=call_id,
                )
            )
            self._message_id = None

    def answer(self) -> _Answer:
        last_said = next((m.content for m in reversed(self.messages) if m.role == "assistant"), "")
        answer = _from_result(self.result) if self.result is not None else _Answer()
        if self.result is None or answer.output is None:
            answer.output = last_said or None
        if answer.usage is None and self._usage:
            answer.usage = sum(self._usage.values(), Usage())
        answer.messages = self.messages
        answer.calls = list(self.calls.values())
        answer.reasoning = self.reasoning
        answer.session_id = answer.session_id or self.session_id
        return answer


_ANSWER_KEYS = ("result", "output", "text")


def _from_result(obj: dict[str, Any]) -> _Answer:
    """A final JSON object: Claude Code's `result`, or any object with an answer field."""
    output = next((obj[k] for k in _ANSWER_KEYS if obj.get(k) is not None), None)
    if output is not None and not isinstance(output, str):
        output = json.dumps(output, ensure_ascii=False)
    subtype = _str(obj.get("subtype"))
    failure = _content_text(obj.get("error")) if obj.get("error") else None
    is_error = (
        obj.get("is_error") is True
        or (subtype is not None and subtype.startswith("error"))
        or (failure is not None and output is None)
    )
    return _Answer(
        output=output,
        is_error=is_error,
        error=(failure or output or subtype or "the agent reported failure") if is_error else None,
        usage=_usage(obj.get("usage")),
        session_id=_str(obj.get("session_id")),
    )


def _usage(raw: object) -> Usage | None:
    """Token usage as agents report it, with OpenTelemetry semantics (input includes cache)."""
    if not isinstance(raw, dict):
        return None

    def count(key: str) -> int:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 0
        return int(value) if math.isfinite(value) and value >= 0 else 0

    cache_read, cache_write = count("cache_read_input_tokens"), count("cache_creation_input_tokens")
    if "prompt_tokens" in raw:
        inputs, outputs = count("prompt_tokens"), count("completion_tokens")
    else:  # Anthropic's input_tokens leaves the cached tokens out
        inputs, outputs = count("input_tokens") + cache_read + cache_write, count("output_tokens")
    usage = Usage(
        input_tokens=inputs,
        output_tokens=outputs,
        cache_read_tokens=cache_read + count("cached_input_tokens"),
        cache_write_tokens=cache_write,
        reasoning_tokens=count("reasoning_output_tokens") or count("reasoning_tokens"),
    )
    return None if usage.is_empty() else usage


def _content_text(content: object) -> str:
    """A tool result's or an error's content as text: a string, text blocks, or JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b["text"] if isinstance(b, dict) and isinstance(b.get("text"), str) else f"[{_kind(b)}]"
            for b in content
        ]
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("message"), str):
        return str(content["message"])
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _kind(block: object) -> str:
    return str(block.get("type", "content")) if isinstance(block, dict) else "content"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else text[:limit] + "…")
