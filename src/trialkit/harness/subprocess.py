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
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from trialkit._record import clean_text
from trialkit.harness._agent_output import AgentOutputError, Answer, Events, OutputFormat, interpret
from trialkit.harness._presets import claude_code_agent, codex_agent
from trialkit.harness._process import MAX_STDOUT_BYTES, AgentStartError, Finished, run_command
from trialkit.harness._sandboxed import MCP_CONFIG, SandboxedTurns, ran_loose
from trialkit.harness._values import agent_values
from trialkit.harness.base import Harness, Reply, Session, TrialContext
from trialkit.harness.mcp import SERVER_NAME
from trialkit.harness.tools import Tool
from trialkit.models.context import current_settings
from trialkit.transcript import Message, ToolCall, TranscriptRecorder, current_recorder

if TYPE_CHECKING:
    from trialkit.capture.proxy import ProxyTrial
    from trialkit.sandbox.base import SandboxPolicy, SandboxProvider

__all__ = ["AgentOutputError", "AgentStartError", "OutputFormat", "SubprocessAgent"]

_MCP_PREFIX = f"mcp__{SERVER_NAME}__"
_PLACEHOLDER = re.compile(
    r"\{(input|mcp_url|mcp_config|workspace|session_id|anthropic_base_url|openai_base_url|home)\}"
)
_PROXY_PLACEHOLDERS = frozenset({"anthropic_base_url", "openai_base_url"})
_FAMILIES = ("anthropic", "openai")
_BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
NO_KEY = "trialkit-no-key"
"""The API key an agent gets when trialkit's environment has none (a replay needs none)."""


class SubprocessAgent(Harness):
    """A command-line agent: `command` runs once per user turn (see the module docs).

    `command` is a list of arguments (a string is split like a shell would). `timeout` bounds
    each turn in seconds; without it the task's timeout bounds the trial. `tools` are served to
    the agent over MCP. `continue_args` are added to the command from the second turn on.
    `proxy` (on by default) points the agent's model calls at trialkit's model proxy, which
    records them; `upstream` is where the proxy sends them on, per family
    (`{"anthropic": "https://...", "openai": "https://.../v1"}`, as the SDKs' `*_BASE_URL`
    variables hold them). `home` gives each trial an empty home folder of its
    own (`HOME`, and `{home}`), where `files` (name -> text, placeholders filled in) are
    written before each turn. `volatile` holds (regular expression, stand-in) pairs for text
    in the agent's requests that changes from run to run without changing the answer (the
    wall time a tool took): cassette keys have the stand-in.
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
        proxy: bool = True,
        upstream: Mapping[str, str] | None = None,
        home: bool = False,
        files: Mapping[str, str] | None = None,
        volatile: Sequence[tuple[str, str]] = (),
        name: str | None = None,
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
        self.name = name or os.path.basename(args[0])
        self.proxy = proxy
        self.upstreams = _upstreams(upstream)
        self.home = home
        self.files = dict(files or {})
        try:
            self.volatile = [(re.compile(pattern), stand_in) for pattern, stand_in in volatile]
        except (re.error, TypeError, ValueError) as exc:
            raise ValueError(
                f"volatile: expected (regular expression, stand-in) pairs: {exc}"
            ) from exc
        for file_name in self.files:
            if Path(file_name).is_absolute() or ".." in Path(file_name).parts:
                raise ValueError(f"files: {file_name!r} must be a path inside the agent's home")
        templates = [*args, *self.continue_args, *self.env.values(), *self.files.values()]
        used = {m for a in templates for m in _PLACEHOLDER.findall(a)}
        if not self.tools and used & {"mcp_url", "mcp_config"}:
            raise ValueError("the command uses {mcp_url} or {mcp_config}, but no tools are served")
        if "session_id" in {m for a in args for m in _PLACEHOLDER.findall(a)}:
            raise ValueError("{session_id} belongs in continue_args: the first turn has none")
        if not proxy and used & _PROXY_PLACEHOLDERS:
            raise ValueError("the command uses the model proxy's URLs, but proxy=False")
        if not home and (self.files or "home" in used):
            raise ValueError("{home} and files= need home=True (a home folder per trial)")
        if self.tools:
            from trialkit.harness.mcp import require_mcp

            require_mcp()
        self._proxy_pid = 0
        self.sandbox_policy: SandboxPolicy | None = None
        self.sandbox_provider: SandboxProvider | None = None
        self._sandbox_setup_pid = 0
        self.runs_from: tuple[str, ...] = ()
        """Host paths the agent runs from (its installation, its interpreter), bound in
        read-only by sandboxes that show only part of the host (the presets set them)."""
        self.boxed_command: list[str] | None = None
        """The command in a sandbox that isolates, where it differs (the Codex preset: its
        own sandbox cannot run nested in one, and trialkit's is the boundary then)."""

    def in_sandbox(self, policy: SandboxPolicy | str, **options: Any) -> SubprocessAgent:
        """Run every turn in a sandbox of `policy` (a provider's name: its default policy),
        the provider made with `options`; refused here, with one line (`SandboxError`), when
        the provider is not installed or cannot enforce the policy. Returns the agent."""
        from trialkit.sandbox.registry import load_provider

        name = policy if isinstance(policy, str) else policy.provider
        provider = load_provider(name, **options)
        if self.boxed_command is not None and provider.capabilities().isolation:
            self.command = list(self.boxed_command)
        option = provider.host_paths_option
        if self.runs_from and option is not None:
            # the agent's installation and interpreter, at the same paths, read-only
            bound = [*(options.get(option) or ()), *self.runs_from]
            provider = load_provider(name, **{**options, option: list(dict.fromkeys(bound))})
            found = shutil.which(self.command[0])
            if found is not None and not os.path.isabs(self.command[0]):
                self.command[0] = os.path.abspath(found)  # the sandbox's PATH may not have it
        chosen = provider.default_policy() if isinstance(policy, str) else policy
        provider.check(chosen)
        self.sandbox_policy, self.sandbox_provider = chosen, provider
        return self

    claude_code = classmethod(claude_code_agent)
    codex = classmethod(codex_agent)

    async def session(self, ctx: TrialContext) -> Session:
        return _CommandSession(self, ctx)

    async def aclose(self) -> None:
        if self.sandbox_provider is not None and self._sandbox_setup_pid == os.getpid():
            self._sandbox_setup_pid = 0
            await self.sandbox_provider.teardown()
        if self._proxy_pid == os.getpid():
            from trialkit.capture.proxy import shared_proxy

            self._proxy_pid = 0
            await anyio.to_thread.run_sync(shared_proxy().release)

    def _open_proxy(self, recorder: TranscriptRecorder) -> ProxyTrial:
        """This trial's way into the process's model proxy (started with the first trial)."""
        from trialkit.capture.proxy import shared_proxy

        proxy = shared_proxy()
        if self._proxy_pid != os.getpid():
            proxy.acquire()
            self._proxy_pid = os.getpid()
        upstreams = dict(self.upstreams)
        for family in _FAMILIES:  # what the agent would have used: its env=, then trialkit's
            given = self.env.get(_BASE_URL_ENV[family])
            if family not in upstreams and given and not _PLACEHOLDER.search(given):
                upstreams[family] = given
        return proxy.open_trial(recorder, current_settings(), upstreams)

    async def _sandbox_ready(self) -> None:
        """The provider's work done once per suite (an image build), in this process."""
        if self.sandbox_provider is not None and self._sandbox_setup_pid != os.getpid():
            assert self.sandbox_policy is not None
            await self.sandbox_provider.setup(self.sandbox_policy)
            self._sandbox_setup_pid = os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_proxy_pid"] = 0  # a copy in another process has not started that one's proxy
        state["_sandbox_setup_pid"] = 0
        return state


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
        self.box: SandboxedTurns | None = None
        if agent.sandbox_provider is not None and agent.sandbox_policy is not None:
            self.box = SandboxedTurns(
                agent.sandbox_provider, agent.sandbox_policy, self.cwd, ctx.sandbox
            )
        self.mcp_config: Path | None = None
        if agent.tools and self.box is None:
            private = Path(tempfile.mkdtemp(prefix="trialkit-mcp-"))  # mode 0700
            self._owned.append(private)
            self.mcp_config = private / "mcp.json"
        self.home: Path | None = None
        if agent.home and self.box is None:
            self.home = Path(tempfile.mkdtemp(prefix="trialkit-home-"))  # mode 0700
            self._owned.append(self.home)
        self.proxy: ProxyTrial | None = None
        if agent.proxy and self.recorder is not None:
            self.proxy = agent._open_proxy(self.recorder)
            self._base_substitutions = list(self.recorder.substitutions)

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
        if self.box is not None:
            await self.box.close()
        if self.proxy is not None:
            self.proxy.close()
        for path in self._owned:
            await anyio.to_thread.run_sync(shutil.rmtree, path, True)

    async def _run_turn(self, turn: int, text: str, url: str | None) -> Reply:
        if self.box is not None:
            await self._open_box(url)
        if url is not None and self.mcp_config is not None:
            _write_private(self.mcp_config, _mcp_config(url))
        values = self._values(text, url)
        env = self._env(turn, url, values)
        self._normalise(env)
        if self.home is not None:
            for file_name, template in self.agent.files.items():
                target = self.home / file_name
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_private(target, _fill(template, values))
        calls_before = len(self.recorder.transcript.model_calls) if self.recorder else 0
        events = Events(MAX_STDOUT_BYTES)
        on_line = None if self.agent.output == "text" else lambda s: events.feed(s, self._now())
        stdin = text.encode() if self.agent.stdin else None
        argv = self._argv(turn, text, values)
        if self.box is not None:
            assert self.box.sandbox is not None
            for file_name, template in self.agent.files.items() if self.agent.home else ():
                path = f"{self.box.home}/{file_name}"
                await self.box.sandbox.write_file(path, _fill(template, values))
            finished = await self.box.run(
                argv,
                cwd=values["workspace"],
                env=env,
                stdin=stdin,
                time_limit=self.agent.timeout,
                on_line=on_line,
            )
        else:
            ran_loose(self.ctx.sandbox)
            finished = await run_command(
                argv,
                cwd=self.cwd,
                env=env,
                stdin=stdin,
                time_limit=self.agent.timeout,
                on_line=on_line,
            )
        if self.proxy is not None:  # the agent may exit on the last byte of an answer
            await anyio.to_thread.run_sync(self.proxy.settle)
        try:
            answer = interpret(self.agent.output, finished.stdout, events)
        except AgentOutputError:
            if finished.returncode == 0:
                raise
            answer = Answer()  # it failed before it could print what it promised
        self.session_id = answer.session_id or self.session_id
        captured = self._captured_since(calls_before)
        return self._reply(answer, finished, served=url is not None, captured=captured)

    async def _open_box(self, url: str | None) -> None:
        """The trial's sandbox (started at the first turn), reaching the model proxy and this
        turn's MCP server."""
        assert self.box is not None
        await self.agent._sandbox_ready()
        proxied = [self.proxy.anthropic_base_url, self.proxy.openai_base_url] if self.proxy else []
        sandbox = await self.box.open(proxied)
        if url is not None:
            await sandbox.allow([url])
            await sandbox.write_file(MCP_CONFIG, _mcp_config(url))

    def _now(self) -> float | None:
        return self.recorder.elapsed() if self.recorder is not None else None

    def _values(self, text: str, url: str | None) -> dict[str, str]:
        box = self.box.sandbox if self.box is not None else None
        mcp_config = MCP_CONFIG if box is not None and url else str(self.mcp_config or "")
        home = self.box.home if self.box is not None and self.agent.home else str(self.home or "")
        return {
            "input": text,
            "mcp_url": url or "",
            "mcp_config": mcp_config,
            "workspace": str(box.workspace) if box is not None else str(self.cwd),
            "session_id": self.session_id or "",
            "anthropic_base_url": self.proxy.anthropic_base_url if self.proxy else "",
            "openai_base_url": self.proxy.openai_base_url if self.proxy else "",
            "home": home,
        }

    def _argv(self, turn: int, text: str, values: dict[str, str]) -> list[str]:
        args = [*self.agent.command, *(self.agent.continue_args if turn > 0 else [])]
        if self.session_id is None and any("{session_id}" in a for a in args):
            raise AgentOutputError(
                f"turn {turn} needs {{session_id}}, but the agent's output so far reported none"
            )
        argv = [_fill(a, values) for a in args]
        if not self.agent.stdin and not any("{input}" in a for a in args):
            argv.append(text)
        return argv

    def _env(self, turn: int, url: str | None, values: Mapping[str, str]) -> dict[str, str]:
        # in a sandbox, nothing of trialkit's environment but the provider keys the agent's
        # calls go upstream with (through the proxy)
        boxed = self.box is not None
        env = {k: os.environ[k] for k in _KEY_ENV.values() if k in os.environ} if boxed else {}
        if not boxed:
            env.update(os.environ)
        env.update({key: _fill(value, values) for key, value in self.agent.env.items()})
        if self.box is not None:
            if self.box.provider.capabilities().isolation:
                env["IS_SANDBOX"] = "1"  # the truth, in a sandbox that isolates
            if self.box.home:
                env["HOME"] = self.box.home
        env.update(
            TRIALKIT_WORKSPACE=values["workspace"],
            TRIALKIT_TASK_ID=self.ctx.task.id,
            TRIALKIT_TRIAL=str(self.ctx.trial_index),
            TRIALKIT_TURN=str(turn),
        )
        loopback = url is not None
        if url is not None:
            env["TRIALKIT_MCP_URL"] = url
        if self.home is not None:
            env["HOME"] = str(self.home)
        if self.proxy is not None:
            loopback = True
            for family in _FAMILIES:
                base = values[f"{family}_base_url"]
                env[_BASE_URL_ENV[family]] = base
                env[f"TRIALKIT_{_BASE_URL_ENV[family]}"] = base
                if not env.get(_KEY_ENV[family]):
                    env[_KEY_ENV[family]] = NO_KEY  # the agent starts; a replay needs no key
        if loopback:
            for key in ("NO_PROXY", "no_proxy"):  # a proxy must not intercept loopback URLs
                env[key] = ",".join(filter(None, [env.get(key), "127.0.0.1", "localhost"]))
        return env

    def _normalise(self, env: Mapping[str, str]) -> None:
        """This trial's values that a replay elsewhere or another day sees differently, as
        placeholders in cassette keys and recordings (`trialkit.harness._values`)."""
        if self.proxy is None or self.recorder is None:
            return
        home = Path(self.box.home) if self.box is not None and self.box.home else self.home
        box = self.box.sandbox if self.box is not None else None
        workspace = Path(str(box.workspace)) if box is not None else self.cwd
        found = agent_values(workspace, home, env.get("TZ"))
        pairs = {*self._base_substitutions, *found}
        self.recorder.substitutions = sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)
        self.recorder.volatile = list(self.agent.volatile)

    def _captured_since(self, count: int) -> bool:
        """Whether the proxy recorded model calls of the agent in this turn."""
        if self.proxy is None or self.recorder is None:
            return False
        calls = self.recorder.transcript.model_calls[count:]
        return any(call.role == "agent" and call.endpoint is not None for call in calls)

    def _reply(self, answer: Answer, finished: Finished, *, served: bool, captured: bool) -> Reply:
        calls = [c for c in answer.calls if not (served and c.name.startswith(_MCP_PREFIX))]
        reasoning = answer.reasoning
        if captured:
            # The model's own tool calls and reasoning came through the proxy already: what
            # the agent printed about them would count them twice.
            calls, reasoning = [], []
            if served and self.recorder is not None:
                _drop_served_twins(self.recorder)
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
            reasoning=reasoning,
            # usage and cost come from the captured calls; the agent's own figure is kept
            usage=None if captured else answer.usage,
            cost_usd=None if captured else answer.cost_usd,
            reported_usage=answer.usage if captured else None,
            reported_cost_usd=answer.cost_usd if captured else None,
        )


def _upstreams(upstream: Mapping[str, str] | None) -> dict[str, str]:
    if upstream is None:
        return {}
    if isinstance(upstream, str):
        raise ValueError('upstream: one URL per family, e.g. {"anthropic": "https://..."}')
    unknown = set(upstream) - set(_FAMILIES)
    if unknown:
        raise ValueError(f"upstream: unknown families {sorted(unknown)}; use anthropic, openai")
    return {family: str(url) for family, url in upstream.items()}


def _fill(template: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _drop_served_twins(recorder: TranscriptRecorder) -> None:
    """The model's calls of tools trialkit serves, seen by the proxy, leave the transcript:
    the MCP server recorded each of them with its result, and its record counts."""
    turn = recorder.turn
    recorder.transcript.tool_calls = [
        call
        for call in recorder.transcript.tool_calls
        if not (call.turn == turn and call.name.startswith(_MCP_PREFIX))
    ]


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
