"""`ToolServer`: Python tools served to an agent over MCP, every call recorded by trialkit.

```python
def write_note(ctx: TrialContext, path: str, text: str) -> str:
    \"\"\"Write a note in the workspace.\"\"\"
    (ctx.world.path / path).write_text(text)
    return "saved"

async with ToolServer([write_note], ctx=trial_context) as server:
    ...  # the agent connects to server.url (MCP Streamable HTTP)
```

The server listens on 127.0.0.1 at a free port and offers exactly the given tools, each with
the JSON Schema that `trialkit.harness.tools.Tool` builds from its signature. It runs inside the
current event loop (uvicorn, as a task of the context manager; the asyncio backend only) and is
ready when `async with` hands it over; leaving the block stops it.

Every call is recorded on the server side, into `server.calls` and into the transcript of the
trial the server serves (the recorder current when the server is made, or `recorder=`), as a
`ToolCall` with its arguments, result, error flag, turn and timing. So what graders see does not
depend on what the agent chooses to report. A call is recorded as soon as it arrives, so a call
cut short by a timeout still shows. Arguments that do not fit the schema, unknown tool names and
exceptions raised by a tool come back to the agent as error results (`is_error`), recorded the
same way; they never bring the server down. A tool that raises `GiveUp` answers
`gave up: <reason>` and sets `server.gave_up`, which makes the turn a reported failure.

Needs the `mcp` extra: `pip install 'trialkit[mcp]'`.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from trialkit._errors import describe, leaves, only
from trialkit.harness.base import HarnessError
from trialkit.harness.tools import GiveUp, Tool, ToolArgumentsError
from trialkit.transcript import ToolCall, TranscriptRecorder, current_recorder

if TYPE_CHECKING:
    import uvicorn
    from anyio.abc import TaskStatus
    from mcp import types as mcp_types
    from mcp.server import Server, ServerRequestContext

    from trialkit.harness.base import TrialContext

__all__ = ["ToolServer", "ToolServerError"]

INSTALL_HINT = "pip install 'trialkit[mcp]'"
SERVER_NAME = "trialkit"
"""The name the server gives itself, and its key in generated MCP client configurations;
agents such as Claude Code name its tools `mcp__trialkit__<tool>`."""

_GRACEFUL_S = 1
"""How long uvicorn waits for open connections (an SSE stream left open) when stopping."""
_START_LIMIT_S = 30.0
_STOP_LIMIT_S = 5.0
_POLL_S = 0.002
"""Bounds on starting and stopping: the server runs shielded from cancellation, so nothing
it waits for may hang a trial."""
_CANCELLED = "[trialkit: the call was cancelled before the tool finished]"


class ToolServerError(HarnessError):
    """The MCP tool server could not start."""


def require_mcp() -> None:
    """Raise `ImportError` naming the `pip install` to run unless the `mcp` extra is here."""
    try:
        import mcp.server.lowlevel  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"serving tools over MCP needs the `mcp` package: {INSTALL_HINT} ({exc})"
        ) from exc


class ToolServer:
    """Serves `tools` (functions or `Tool`s) over MCP Streamable HTTP at `url` while inside
    `async with`; records each call (see the module docs).

    `ctx` is handed to tools that declare a `TrialContext` parameter. `recorder` is the trial
    transcript to record into; by default the one current when the server is made (captured
    then, not looked up when a call arrives: calls are served from uvicorn's tasks).
    """

    def __init__(
        self,
        tools: Sequence[Callable[..., Any] | Tool],
        *,
        ctx: TrialContext | None = None,
        recorder: TranscriptRecorder | None = None,
    ) -> None:
        self.tools: dict[str, Tool] = {}
        for fn in tools:
            tool = fn if isinstance(fn, Tool) else Tool(fn)
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.ctx = ctx
        self.recorder = recorder if recorder is not None else current_recorder()
        self.calls: list[ToolCall] = []
        """Every call this server received, in the order they arrived."""
        self.gave_up: str | None = None
        """The reason of the first tool that raised `GiveUp`: the agent's turn is then a
        reported failure (the agent sees `gave up: <reason>` as the tool's result)."""
        self.port: int | None = None
        self._stack: AsyncExitStack | None = None
        self._in_flight: set[anyio.CancelScope] = set()
        self._used = False

    @property
    def url(self) -> str:
        """The Streamable HTTP endpoint, `http://127.0.0.1:PORT/mcp`, once started."""
        if self.port is None:
            raise RuntimeError("the tool server is not running; use `async with ToolServer(...)`")
        return f"http://127.0.0.1:{self.port}/mcp"

    async def __aenter__(self) -> ToolServer:
        if self._used:
            raise RuntimeError("a ToolServer runs once; make a new one")
        self._used = True
        require_mcp()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise ToolServerError("the MCP tool server runs on the asyncio backend only") from None
        stop = anyio.Event()
        async with AsyncExitStack() as stack:
            group = await stack.enter_async_context(anyio.create_task_group())
            # Registered before the server starts, so a failed or cancelled start still stops it.
            stack.callback(stop.set)
            self.port = await group.start(self._serve, stop)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        self.port = None
        for scope in list(self._in_flight):
            scope.cancel()
        if stack is None:
            return
        try:
            await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            if exc is None or leaves(group) != [exc]:
                raise
            # Only the block's own exception, wrapped by the server's task group: let it
            # propagate as it was raised (a timeout stays a `TimeoutError`).

    async def _serve(self, stop: anyio.Event, *, task_status: TaskStatus[int]) -> None:
        import uvicorn

        config = uvicorn.Config(
            self._app(),
            host="127.0.0.1",
            port=0,  # the OS picks a free port: no race with other servers
            http="h11",
            ws="none",
            lifespan="on",
            log_config=None,  # never reconfigure the user's logging
            access_log=False,
            timeout_graceful_shutdown=_GRACEFUL_S,
        )
        server = _quiet_server(config, stop, task_status.started)
        # Shielded: uvicorn's lifespan runs in a task of its own that only a completed shutdown
        # ends, so an outer cancellation must not cut the shutdown short. The stop is bounded.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve()
            except (SystemExit, TimeoutError):  # SystemExit: uvicorn's answer to a failed start
                raise ToolServerError("the MCP tool server could not start on 127.0.0.1") from None

    def _app(self) -> Any:
        from mcp.server import Server

        server: Server[Any] = Server(
            SERVER_NAME,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        return server.streamable_http_app()

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self.tools.get(name)
        return tool.spec.parameters if tool is not None else None

    async def _list_tools(
        self, _ctx: ServerRequestContext[Any], _params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        from mcp import types as mcp_types

        return mcp_types.ListToolsResult(
            tools=[
                mcp_types.Tool(
                    name=tool.name,
                    description=tool.description or None,
                    input_schema=tool.spec.parameters,
                )
                for tool in self.tools.values()
            ]
        )

    async def _call_tool(
        self, _ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        from mcp import types as mcp_types

        call = self._record(params.name, dict(params.arguments or {}))
        clock = time.perf_counter()
        call.result, call.is_error = _CANCELLED, True
        # Cancelled by the server when it stops (the trial timed out, the agent is gone): the
        # call then ends here, as a result, instead of as an exception out of the ASGI app.
        with anyio.CancelScope() as scope:
            self._in_flight.add(scope)
            try:
                call.result, call.is_error = await self._run(call)
            finally:
                self._in_flight.discard(scope)
                call.duration_s = time.perf_counter() - clock
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=call.result)],
            is_error=call.is_error,
        )

    def _record(self, name: str, arguments: dict[str, Any]) -> ToolCall:
        recorder = self.recorder
        call = ToolCall(
            id=f"mcp_{secrets.token_hex(6)}",
            name=name,
            arguments=arguments,
            turn=recorder.turn if recorder is not None else 0,
            started_at=recorder.elapsed() if recorder is not None else None,
        )
        self.calls.append(call)
        if recorder is not None:
            recorder.add_tool_call(call)
        return call

    async def _run(self, call: ToolCall) -> tuple[str, bool]:
        """The call's result text and whether it is an error; never raises for the tool."""
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return f"no tool named {call.name!r}; the tools are: {known}", True
        try:
            return await tool.call(call.arguments, ctx=self.ctx), False
        except ToolArgumentsError as exc:
            return str(exc), True
        except Exception as exc:
            given = only(exc, GiveUp)  # a deliberate answer, not a broken tool
            if given is None:
                return "{}: {}".format(*describe(exc)), True
            reason = str(given) or f"{call.name} gave up"
            self.gave_up = self.gave_up or reason
            return f"gave up: {reason}", False


def _quiet_server(
    config: uvicorn.Config, stop: anyio.Event, started: Callable[[int], None]
) -> uvicorn.Server:
    """A uvicorn server that leaves signals alone, reports its port once it listens, and
    waits for `stop` instead of polling."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            # Ctrl-C belongs to trialkit, and concurrent trials' servers would overwrite each
            # other's handlers.
            yield

        async def startup(self, sockets: list[Any] | None = None) -> None:
            with anyio.fail_after(_START_LIMIT_S):
                await super().startup(sockets)
            if self.started:
                started(int(self.servers[0].sockets[0].getsockname()[1]))

        async def main_loop(self) -> None:
            await self.on_tick(0)  # sets the default response headers
            await stop.wait()

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            # uvicorn's own shutdown sleeps a fixed 0.1 s and then polls every 0.1 s: a tenth
            # of a second on every turn. The turn's agent has exited by now, so connections
            # close at once; poll finely instead, within the same bound.
            with anyio.move_on_after(_STOP_LIMIT_S):
                for server in self.servers:
                    server.close()
                for connection in list(self.server_state.connections):
                    connection.shutdown()
                with anyio.move_on_after(_GRACEFUL_S):
                    # uvicorn's server state has no event to wait on
                    while self.server_state.connections or self.server_state.tasks:  # noqa: ASYNC110
                        await anyio.sleep(_POLL_S)
                for task in list(self.server_state.tasks):
                    task.cancel()
                for server in self.servers:
                    await server.wait_closed()
                await self.lifespan.shutdown()

    return QuietServer(config)
