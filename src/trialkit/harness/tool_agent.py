"""`ToolAgent`: a model that calls Python functions until it has an answer.

```python
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b

suite = Suite(harness=ToolAgent("openai/gpt-4o-mini", [add]), tasks=[...])
```

Each user turn runs the loop: the model is called with the tools; while it asks for tool calls,
they run (in order) and their results go back to it; its first answer without tool calls is the
turn's output. A tool that raises, an unknown tool name or arguments that do not fit the
signature become error results the model sees — the loop never raises for them. A tool that
raises `GiveUp` ends the turn as a reported failure (`outcome.failed`). Every call, with its
result, lands in the trial's transcript.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from trialkit._errors import describe, only
from trialkit.harness.base import Reply, Session, TrialContext
from trialkit.harness.chat import ChatHarness
from trialkit.harness.tools import GiveUp, Tool, ToolArgumentsError
from trialkit.models.base import GenerationConfig, Model, ModelRequest, ResponseFormat, ToolChoice
from trialkit.models.managed import ManagedModel
from trialkit.transcript import Message, ToolCall, current_recorder

__all__ = ["ToolAgent"]


class ToolAgent(ChatHarness):
    """A model with tools: plain Python functions (sync or async), described to the model by
    a JSON Schema from their type hints and docstrings (see `trialkit.harness.tools`).

    The model is `model` if given, otherwise the trial's model, as for the chat harness.
    `max_turns` bounds the model calls of one user turn; reaching it without a final answer
    fails the turn. `tool_choice` applies to the first model call of each user turn only (a
    forced call on every step could never end); later calls leave the choice to the model.
    The conversation, tool calls and results included, persists across the turns of a trial.
    """

    name = "tool_agent"

    def __init__(
        self,
        model: str | Model | None = None,
        tools: Sequence[Callable[..., Any] | Tool] = (),
        *,
        system: str | None = None,
        max_turns: int = 10,
        config: GenerationConfig | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        super().__init__(model, system=system, config=config)
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.max_turns = max_turns
        self.tool_choice = tool_choice
        self.tools: dict[str, Tool] = {}
        for fn in tools:
            tool = fn if isinstance(fn, Tool) else Tool(fn)
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            self.tools[tool.name] = tool

    async def session(self, ctx: TrialContext) -> Session:
        system = self.system if self.system is not None else ctx.system
        config = self.config or ctx.task.config or ctx.config or GenerationConfig()
        return _ToolSession(self, ctx, self.resolve(ctx), system, config, ctx.task.response_format)


class _ToolSession(Session):
    def __init__(
        self,
        agent: ToolAgent,
        ctx: TrialContext,
        model: ManagedModel,
        system: str | None,
        config: GenerationConfig,
        response_format: ResponseFormat | None,
    ) -> None:
        self.agent = agent
        self.ctx = ctx
        self.model = model
        self.system = system
        self.config = config
        self.response_format = response_format
        self.history: list[Message] = []
        self.specs = [tool.spec for tool in agent.tools.values()]

    def _request(self, tool_choice: ToolChoice | None) -> ModelRequest:
        messages = self.history
        if self.system and not any(m.role == "system" for m in messages):
            messages = [Message(role="system", content=self.system), *messages]
        return ModelRequest(
            messages=list(messages),
            tools=self.specs,
            tool_choice=tool_choice if self.specs else None,
            config=self.config,
            response_format=self.response_format,
        )

    async def send(self, message: str | list[Message]) -> Reply:
        if isinstance(message, str):
            self.history.append(Message(role="user", content=message))
        else:
            self.history.extend(message)
        steps: list[Message] = []
        calls: list[ToolCall] = []
        reasoning: list[str] = []
        choice = self.agent.tool_choice
        turns = 0
        while True:
            response = await self.model.generate(self._request(choice))
            turns += 1
            choice = None
            reasoning.extend(response.reasoning)
            said = response.message
            self.history.append(said)
            steps.append(said)
            if not said.tool_calls:
                return Reply(
                    output=response.text, messages=steps, tool_calls=calls, reasoning=reasoning
                )
            stop = turns >= self.agent.max_turns
            gave_up: str | None = None
            for asked in said.tool_calls:
                if stop or gave_up is not None:
                    reason = _STOPPED.format(turns) if stop else _SKIPPED
                    done = asked.model_copy(update={"result": reason, "is_error": True})
                else:
                    done, gave_up = await self._run(asked)
                calls.append(done)
                answer = Message(
                    role="tool",
                    content=done.result or "",
                    name=done.name,
                    tool_call_id=done.id,
                )
                self.history.append(answer)
                steps.append(answer)
            if gave_up is not None:
                return Reply(
                    is_error=True,
                    error=gave_up,
                    messages=steps,
                    tool_calls=calls,
                    reasoning=reasoning,
                )
            if stop:
                error = f"stopped after {turns} model turns without a final answer"
                return Reply(
                    is_error=True,
                    error=error,
                    messages=steps,
                    tool_calls=calls,
                    reasoning=reasoning,
                )

    async def _run(self, call: ToolCall) -> tuple[ToolCall, str | None]:
        """Run one tool call; the reason too when the tool gave up the turn."""
        recorder = current_recorder()
        started = recorder.elapsed() if recorder is not None else None
        clock = time.perf_counter()
        tool = self.agent.tools.get(call.name)
        is_error = True
        gave_up: str | None = None
        if tool is None:
            result = f"no tool named {call.name!r}; the tools are: " + (
                ", ".join(self.agent.tools) or "none"
            )
        else:
            try:
                result = await tool.call(call.arguments, ctx=self.ctx)
                is_error = False
            except ToolArgumentsError as exc:
                result = str(exc)
            except Exception as exc:
                given = only(exc, GiveUp)  # a deliberate answer, not a broken tool
                if given is not None:
                    gave_up = str(given) or f"{call.name} gave up"
                    result = f"gave up: {gave_up}"
                    is_error = False
                else:
                    result = "{}: {}".format(*describe(exc))
        done = call.model_copy(
            update={
                "result": result,
                "is_error": is_error,
                "started_at": started,
                "duration_s": time.perf_counter() - clock,
            }
        )
        return done, gave_up


_STOPPED = "not run: the agent stopped after {} model turns"
_SKIPPED = "not run: an earlier tool call gave up the turn"
