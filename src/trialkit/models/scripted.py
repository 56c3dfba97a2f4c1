"""`scripted/...`: a model that plays back answers you wrote, for tests and examples.

```python
model = ScriptedModel("capitals", ["Paris", ToolCall(id="1", name="search", arguments={})])
```

Each trial starts the script from the top, so every trial sees the same conversation; give a
function to vary answers by trial. Steps are strings (the answer), `ToolCall`s or lists of them
(a tool-calling turn), `ModelResponse`s (full control), exceptions (raised, to test error
paths), or a function `(request, trial_index) -> any of these`.

By id, `get_model("scripted/echo")` answers with the last user message, and
`get_model("scripted/NAME")` for any other NAME answers "NAME" to everything.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence

from trialkit.models.base import Model, ModelRequest, ModelResponse
from trialkit.transcript import Message, ToolCall, TranscriptRecorder, Usage, current_recorder

Step = str | ToolCall | list[ToolCall] | ModelResponse | BaseException
StepFunction = Callable[[ModelRequest, int], Step]


class ScriptedModel(Model):
    """Plays back a script of answers; usage is counted as 1 token per 4 characters."""

    provider = "scripted"

    def __init__(
        self,
        name: str,
        script: Sequence[Step] | StepFunction | None = None,
        *,
        cycle: bool = True,
    ) -> None:
        super().__init__(name)
        self.script = script
        self.cycle = cycle
        self._positions: weakref.WeakKeyDictionary[TranscriptRecorder, int] = (
            weakref.WeakKeyDictionary()
        )
        self._outside = 0

    @property
    def supports_structured_output(self) -> bool:
        return True

    async def generate(self, request: ModelRequest) -> ModelResponse:
        step = self._next_step(request)
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, ModelResponse):
            return step
        if isinstance(step, ToolCall):
            step = [step]
        if isinstance(step, list):
            message = Message(role="assistant", content="", tool_calls=step)
            finish = "tool_calls"
        else:
            message = Message(role="assistant", content=step)
            finish = "stop"
        return ModelResponse(
            message=message,
            finish_reason=finish,
            usage=_usage(request, message),
            model=self.name,
            id=None,
        )

    def _next_step(self, request: ModelRequest) -> Step:
        recorder = current_recorder()
        trial = recorder.trial_index if recorder else 0
        script = self.script
        if script is None:
            return _last_user(request) if self.name == "echo" else self.name
        if callable(script):
            return script(request, trial)
        if not script:
            raise ValueError(f"scripted/{self.name}: the script is empty")
        if recorder is None:
            position, self._outside = self._outside, self._outside + 1
        else:
            position = self._positions.get(recorder, 0)
            self._positions[recorder] = position + 1
        if position >= len(script):
            if not self.cycle:
                raise IndexError(
                    f"scripted/{self.name}: the script has {len(script)} steps and this trial "
                    f"asked for step {position + 1}"
                )
            position %= len(script)
        return script[position]


def _last_user(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""


def _usage(request: ModelRequest, answer: Message) -> Usage:
    sent = sum(len(m.content) for m in request.messages)
    said = len(answer.content) + sum(
        len(json.dumps(c.arguments)) + len(c.name) for c in answer.tool_calls
    )
    return Usage(input_tokens=max(1, sent // 4), output_tokens=max(1, said // 4))
