"""A deterministic chat model that plays a script: for tests, benchmarks and the offline demo."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hookmesh.models._base import (
    ChatModel,
    ModelChunk,
    ModelError,
    ModelResponse,
    ModelResult,
    OutputFormat,
    ToolCallDelta,
    ToolChoice,
)
from hookmesh.schema import (
    Message,
    MessageKind,
    ToolCall,
    Usage,
    estimate_tokens,
    is_assistant,
    is_hint,
    is_tool_result,
    is_user,
    make_assistant,
)

NO_TOOLS_TEXT = "I will answer without calling tools."
"""Said by a scripted turn whose tool calls were suppressed by tool_choice="none"."""


@dataclass
class ScriptedTurn:
    """One scripted model answer."""

    text: str = ""
    """Answer text."""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    """Calls as (tool name, arguments); a str argument is sent verbatim (even invalid JSON)."""
    reasoning: str = ""
    """Reasoning text, streamed before the answer."""
    usage: Usage | None = None
    """Usage to report; estimated from the text when None."""
    error: str = ""
    """When set, the call fails with a ModelError carrying this message."""


Script = Callable[[Sequence[Message], Sequence[dict[str, Any]], ToolChoice], ScriptedTurn]
"""A function choosing the turn from the prompt, for tests that react to their input."""


class ScriptedChatModel(ChatModel):
    """Plays `turns` in order (cycling when `repeat`), honouring tool_choice.

    With `per_reply`, the turn is chosen by the prompt instead: the first turn answers a
    user's message, the next answers the first tool results, and so on (the count of
    assistant messages since the last user input), and call and response ids come from
    that position; so concurrent replies each play the script from its start, and the same
    prompt gets the same answer in any process (a step run again after a cut, elsewhere).

    With ``tool_choice="none"`` a turn's tool calls are dropped (and the text defaults to
    `NO_TOOLS_TEXT`); with a specific tool name only calls of that tool are kept. Streaming
    splits text into `chunk_size`-character chunks, with `delay` seconds between chunks.

    With `native_output` it claims a JSON-schema mode (so the agent asks it for structured
    answers natively) and plays its text as the answer; `last_output` records the format
    it was asked for. Without it, structured answers come through the final-answer tool.
    """

    provider_name = "scripted"

    def __init__(
        self,
        turns: Sequence[ScriptedTurn | str] | Script = (),
        *,
        stream: bool = False,
        chunk_size: int = 8,
        delay: float = 0.0,
        repeat: bool = False,
        model_name: str = "scripted",
        per_reply: bool = False,
        native_output: bool = False,
    ) -> None:
        self._script: Script | None = turns if callable(turns) else None
        self._turns = (
            [] if callable(turns) else [ScriptedTurn(t) if isinstance(t, str) else t for t in turns]
        )
        self.stream = stream
        self.chunk_size = max(1, chunk_size)
        self.delay = delay
        self.repeat = repeat
        self.model_name = model_name
        self.per_reply = per_reply
        self.calls: int = 0
        """How many times the model was called."""
        self.last_tool_choice: ToolChoice | None = None
        """The tool_choice of the most recent call."""
        self.native_output = native_output
        self.last_output: OutputFormat | None = None
        """The output format of the most recent call (None when it asked for none)."""
        self.last_messages: list[Message] = []
        """The prompt of the most recent call."""
        self._ids = 0

    def _next_turn(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], tool_choice: ToolChoice
    ) -> ScriptedTurn:
        if self._script is not None:
            return self._script(messages, tools, tool_choice)
        index = _position(messages) if self.per_reply else self.calls - 1
        if index >= len(self._turns):
            if not self.repeat or not self._turns:
                raise ModelError(
                    f"scripted model has no turn {index + 1} (script has {len(self._turns)})"
                )
            index %= len(self._turns)
        return self._turns[index]

    def _calls(self, turn: ScriptedTurn, tool_choice: ToolChoice, position: int) -> list[ToolCall]:
        calls = []
        for j, (name, args) in enumerate(turn.tool_calls):
            if tool_choice == "none" or (
                tool_choice not in ("auto", "required") and name != tool_choice
            ):
                continue
            self._ids += 1
            call_id = f"call_{position}_{j}" if self.per_reply else f"call_{self._ids}"
            arguments = args if isinstance(args, str) else json.dumps(args)
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        return calls

    async def __call__(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: ToolChoice = "auto",
        kind: MessageKind = "flat",
        output: OutputFormat | None = None,
    ) -> ModelResult:
        self.calls += 1
        self.last_tool_choice = tool_choice
        self.last_output = output
        self.last_messages = list(messages)
        turn = self._next_turn(messages, tools, tool_choice)
        if turn.error:
            raise ModelError(turn.error)
        position = _position(messages) if self.per_reply else self.calls
        calls = self._calls(turn, tool_choice, position)
        text = turn.text or (NO_TOOLS_TEXT if turn.tool_calls and not calls else "")
        usage = turn.usage or Usage(
            input_tokens=estimate_tokens(messages),
            output_tokens=max(1, len(text) // 4),
        )
        stop = "tool_calls" if calls else "stop"
        if self.stream:
            return self._chunks(turn.reasoning, text, calls, usage, stop, f"resp_{position}")
        message = make_assistant(kind, text, calls, reasoning=turn.reasoning, name=self.model_name)
        return ModelResponse(
            message=message, usage=usage, stop_reason=stop, response_id=f"resp_{position}"
        )

    async def _chunks(
        self,
        reasoning: str,
        text: str,
        calls: list[ToolCall],
        usage: Usage,
        stop: str,
        response_id: str,
    ) -> AsyncIterator[ModelChunk]:
        n = self.chunk_size
        for i in range(0, len(reasoning), n):
            await self._pause()
            yield ModelChunk(reasoning=reasoning[i : i + n])
        for i in range(0, len(text), n):
            await self._pause()
            yield ModelChunk(text=text[i : i + n])
        for call in calls:
            await self._pause()
            yield ModelChunk(tool_call=ToolCallDelta(call.id, call.name, call.arguments[:n]))
            for i in range(n, len(call.arguments), n):
                yield ModelChunk(tool_call=ToolCallDelta(call.id, "", call.arguments[i : i + n]))
        yield ModelChunk(usage=usage, stop_reason=stop, response_id=response_id)

    async def _pause(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)


def _position(messages: Sequence[Message]) -> int:
    """How many model answers the prompt holds since its last user input."""
    count = 0
    for msg in reversed(messages):
        if is_assistant(msg):
            count += 1
        elif is_user(msg) and not is_tool_result(msg) and not is_hint(msg):
            break
    return count
