"""Chat models that fail on purpose, for the resilience tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from hookmesh.models import ChatModel, ModelError, ModelResult, ScriptedChatModel
from hookmesh.schema import Message, MessageKind


class FlakyModel(ChatModel):
    """Fails its first `failures` calls with a `ModelError` of `status` — when called
    (``at="call"``), or at the first chunk of the stream (``at="first_chunk"``) — then
    answers like `ScriptedChatModel(turns, stream=...)`."""

    provider_name = "flaky"

    def __init__(
        self,
        turns: Any,
        *,
        failures: int,
        status: int = 503,
        at: str = "call",
        model_name: str = "flaky",
    ) -> None:
        self.failures = failures
        self.status = status
        self.at = at
        self.model_name = model_name
        self.stream = at == "first_chunk"
        self.inner = ScriptedChatModel(turns, stream=self.stream, model_name=model_name)
        self.calls = 0

    async def __call__(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str = "auto",
        kind: MessageKind = "flat",
    ) -> ModelResult:
        self.calls += 1
        if self.calls <= self.failures:
            error = ModelError(f"{self.model_name} is overloaded", status=self.status)
            if self.at == "call":
                raise error
            return _broken(error)
        return await self.inner(messages, tools=tools, tool_choice=tool_choice, kind=kind)


async def _broken(error: ModelError) -> AsyncIterator[Any]:
    raise error
    yield
