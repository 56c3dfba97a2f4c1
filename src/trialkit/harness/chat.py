"""The `chat` harness: a model is the agent. System prompt + the task's turns -> its answers."""

from __future__ import annotations

from trialkit.harness.base import Harness, Reply, Session, TrialContext
from trialkit.models.base import GenerationConfig, Model, ModelRequest, ResponseFormat
from trialkit.models.managed import ManagedModel
from trialkit.models.registry import get_model
from trialkit.task import SuiteError
from trialkit.transcript import Message

NO_MODEL = (
    "no model to evaluate: name one with Suite(model=...) or Task(model=...), "
    "pass --model, or set TRIALKIT_MODEL"
)


class ChatHarness(Harness):
    """Sends the conversation to a model and returns its answer, turn after turn.

    The model is `model` if given, otherwise the trial's model (task's, suite's, then
    `--model` / `TRIALKIT_MODEL`). A string input is a user message; chat messages are sent as
    they are (their system message wins over the suite's `system`).
    """

    name = "chat"

    def __init__(
        self,
        model: str | Model | None = None,
        *,
        system: str | None = None,
        config: GenerationConfig | None = None,
    ) -> None:
        self.model = model
        self.system = system
        self.config = config
        self._models: dict[str, ManagedModel] = {}

    def resolve(self, ctx: TrialContext) -> ManagedModel:
        chosen = self.model if self.model is not None else ctx.model
        if chosen is None:
            raise SuiteError(NO_MODEL)
        key = chosen if isinstance(chosen, str) else f"{chosen.id}@{id(chosen)}"
        if key not in self._models:
            self._models[key] = get_model(chosen)
        return self._models[key]

    async def session(self, ctx: TrialContext) -> Session:
        system = self.system if self.system is not None else ctx.system
        config = self.config or ctx.task.config or ctx.config or GenerationConfig()
        return _ChatSession(self.resolve(ctx), system, config, ctx.task.response_format)

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()
        self._models.clear()


class _ChatSession(Session):
    def __init__(
        self,
        model: ManagedModel,
        system: str | None,
        config: GenerationConfig,
        response_format: ResponseFormat | None,
    ) -> None:
        self.model = model
        self.config = config
        self.response_format = response_format
        self.history: list[Message] = []
        self.system = system

    async def send(self, message: str | list[Message]) -> Reply:
        if isinstance(message, str):
            self.history.append(Message(role="user", content=message))
        else:
            self.history.extend(message)
        messages = self.history
        if self.system and not any(m.role == "system" for m in messages):
            messages = [Message(role="system", content=self.system), *messages]
        request = ModelRequest(
            messages=messages, config=self.config, response_format=self.response_format
        )
        response = await self.model.generate(request)
        self.history.append(response.message)
        return Reply(output=response.text, reasoning=response.reasoning)
