"""Turning a model result (full response or chunk stream) into events and one message."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from hookmesh.models import STOP_CUT, ModelChunk, ModelResponse, ModelResult
from hookmesh.schema import (
    AgentEvent,
    MessageKind,
    ReasoningBlockDeltaEvent,
    ReasoningBlockEndEvent,
    ReasoningBlockStartEvent,
    TextBlock,
    TextBlockDeltaEvent,
    TextBlockEndEvent,
    TextBlockStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolOutputBlock,
    ToolResultState,
    Usage,
    make_assistant,
    reasoning_of,
    text_of,
    tool_calls,
)


@dataclass(slots=True)
class StreamOutcome:
    """What a model call produced, filled in while its events are yielded."""

    response: ModelResponse | None = None
    """The complete response, available once the event stream is exhausted."""


@dataclass(slots=True)
class _Call:
    name: str
    arguments: list[str] = field(default_factory=list)


async def response_events(
    reply_id: str,
    result: ModelResult,
    kind: MessageKind,
    new_block_id: Callable[[], str],
    outcome: StreamOutcome,
    model_name: Callable[[], str],
) -> AsyncIterator[AgentEvent]:
    """Yield the block events of `result` in streaming-UI order and fill `outcome`.

    A full response is replayed as single-delta blocks (reasoning, text, tool calls), so
    consumers see one event shape whether or not the model streamed.
    """
    if isinstance(result, ModelResponse):
        async for event in _replay(reply_id, result, new_block_id):
            yield event
        outcome.response = result
        return
    texts: list[str] = []
    reasoning: list[str] = []
    calls: dict[str, _Call] = {}
    usage: Usage | None = None
    stop_reason = response_id = ""
    open_kind = ""
    block_id = ""
    chunk: ModelChunk
    async for chunk in result:
        if chunk.reasoning:
            if open_kind != "reasoning":
                if open_kind == "text":
                    yield TextBlockEndEvent(reply_id=reply_id, block_id=block_id)
                open_kind, block_id = "reasoning", new_block_id()
                yield ReasoningBlockStartEvent(reply_id=reply_id, block_id=block_id)
            reasoning.append(chunk.reasoning)
            yield ReasoningBlockDeltaEvent(
                reply_id=reply_id, block_id=block_id, delta=chunk.reasoning
            )
        if chunk.text:
            if open_kind != "text":
                if open_kind == "reasoning":
                    yield ReasoningBlockEndEvent(reply_id=reply_id, block_id=block_id)
                open_kind, block_id = "text", new_block_id()
                yield TextBlockStartEvent(reply_id=reply_id, block_id=block_id)
            texts.append(chunk.text)
            yield TextBlockDeltaEvent(reply_id=reply_id, block_id=block_id, delta=chunk.text)
        piece = chunk.tool_call
        if piece is not None:
            call = calls.get(piece.call_id)
            if call is None:
                if open_kind:
                    yield _end(open_kind, reply_id, block_id)
                    open_kind = ""
                call = calls[piece.call_id] = _Call(piece.name)
                yield ToolCallStartEvent(reply_id=reply_id, call_id=piece.call_id, name=piece.name)
            if piece.arguments:
                call.arguments.append(piece.arguments)
                yield ToolCallDeltaEvent(
                    reply_id=reply_id, call_id=piece.call_id, delta=piece.arguments
                )
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.stop_reason:
            stop_reason = chunk.stop_reason
        if chunk.response_id:
            response_id = chunk.response_id
    if open_kind:
        yield _end(open_kind, reply_id, block_id)
    for call_id in calls:
        yield ToolCallEndEvent(reply_id=reply_id, call_id=call_id)
    if stop_reason == STOP_CUT:
        calls.clear()  # a cut stream's calls may hold half their arguments: never run them
    message = make_assistant(
        kind,
        "".join(texts),
        [ToolCall(id=i, name=c.name, arguments="".join(c.arguments)) for i, c in calls.items()],
        reasoning="".join(reasoning),
        name=model_name(),  # read at the end: a retried stream may come from another model
    )
    outcome.response = ModelResponse(message, usage, stop_reason, response_id)


def _end(open_kind: str, reply_id: str, block_id: str) -> AgentEvent:
    if open_kind == "text":
        return TextBlockEndEvent(reply_id=reply_id, block_id=block_id)
    return ReasoningBlockEndEvent(reply_id=reply_id, block_id=block_id)


async def _replay(
    reply_id: str, response: ModelResponse, new_block_id: Callable[[], str]
) -> AsyncIterator[AgentEvent]:
    msg = response.message
    if reasoning := reasoning_of(msg):
        bid = new_block_id()
        yield ReasoningBlockStartEvent(reply_id=reply_id, block_id=bid)
        yield ReasoningBlockDeltaEvent(reply_id=reply_id, block_id=bid, delta=reasoning)
        yield ReasoningBlockEndEvent(reply_id=reply_id, block_id=bid)
    if text := text_of(msg):
        bid = new_block_id()
        yield TextBlockStartEvent(reply_id=reply_id, block_id=bid)
        yield TextBlockDeltaEvent(reply_id=reply_id, block_id=bid, delta=text)
        yield TextBlockEndEvent(reply_id=reply_id, block_id=bid)
    for call in tool_calls(msg):
        yield ToolCallStartEvent(reply_id=reply_id, call_id=call.id, name=call.name)
        if call.arguments:
            yield ToolCallDeltaEvent(reply_id=reply_id, call_id=call.id, delta=call.arguments)
        yield ToolCallEndEvent(reply_id=reply_id, call_id=call.id)


class OutputCollector:
    """Rebuilds a tool's output from its tool_result events (text runs merge into one block)."""

    __slots__ = ("_text", "output", "state")

    def __init__(self) -> None:
        self._text: list[str] = []
        self.output: list[ToolOutputBlock] = []
        self.state: ToolResultState = "success"

    def add(self, event: AgentEvent) -> None:
        """Take in one tool_result_delta or tool_result_end event."""
        if event.type == "tool_result_delta":
            if event.media is not None:
                self._flush()
                self.output.append(event.media)
            else:
                self._text.append(event.text)
        elif event.type == "tool_result_end":
            self.state = event.state

    def _flush(self) -> None:
        if self._text:
            self.output.append(TextBlock(text="".join(self._text)))
            self._text = []

    def finish(self) -> list[ToolOutputBlock]:
        """The complete output."""
        self._flush()
        return self.output
