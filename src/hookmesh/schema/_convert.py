"""Conversion between the flat and agentic kinds (mapping documented in docs/messages.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hookmesh.schema._blocks import (
    ContentBlock,
    HintBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolOutputBlock,
    ToolResultBlock,
)
from hookmesh.schema._messages import AgenticMessage, FlatMessage, Message, MessageKind, ToolCall


def _common(msg: Message) -> dict[str, Any]:
    return {
        "id": msg.id,
        "metadata": msg.metadata,
        "create_time": msg.create_time,
        "name": msg.name,
        "usage": msg.usage,
    }


def _leading_text(blocks: list[ToolOutputBlock]) -> tuple[str, list[ToolOutputBlock]]:
    """Split off a leading text block as flat `content`; the rest become `parts`."""
    if blocks and isinstance(blocks[0], TextBlock):
        return blocks[0].text, blocks[1:]
    return "", blocks


def flat_to_agentic(msg: FlatMessage) -> AgenticMessage:
    """One flat message as one agentic message (tool → user message with a tool_result)."""
    text: list[TextBlock] = [TextBlock(text=msg.content)] if msg.content else []
    common = _common(msg)
    if msg.role == "tool":
        result = ToolResultBlock(
            call_id=msg.tool_call_id,
            name=msg.tool_name,
            output=[*text, *msg.parts],
            state=msg.tool_result_state,
        )
        return AgenticMessage(role="user", blocks=[result], **common)
    blocks: list[ContentBlock] = []
    if msg.reasoning_content:
        blocks.append(ReasoningBlock(text=msg.reasoning_content))
    blocks.extend(text)
    blocks.extend(msg.parts)
    blocks.extend(
        ToolCallBlock(call_id=c.id, name=c.name, arguments=c.arguments) for c in msg.tool_calls
    )
    return AgenticMessage(role=msg.role, blocks=blocks, **common)


def agentic_to_flat(msg: AgenticMessage) -> list[FlatMessage]:
    """One agentic message as flat messages: each tool result becomes a tool message first,
    then the rest of the message (if any) follows as one message of its role.

    When one agentic message yields several flat ones, the first keeps the id and the others
    get ``{id}#{n}``.
    """
    common = _common(msg)
    out: list[FlatMessage] = []
    rest: list[ToolOutputBlock] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for block in msg.blocks:
        if isinstance(block, ToolResultBlock):
            content, parts = _leading_text(list(block.output))
            out.append(
                FlatMessage(
                    role="tool",
                    content=content,
                    parts=parts,
                    tool_call_id=block.call_id,
                    tool_name=block.name,
                    tool_result_state=block.state,
                    **common,
                )
            )
        elif isinstance(block, ToolCallBlock):
            calls.append(ToolCall(id=block.call_id, name=block.name, arguments=block.arguments))
        elif isinstance(block, ReasoningBlock):
            reasoning.append(block.text)
        elif isinstance(block, HintBlock):
            rest.append(TextBlock(text=block.text))
        else:
            rest.append(block)
    if rest or reasoning or calls or not out:
        content, parts = _leading_text(rest)
        out.append(
            FlatMessage(
                role=msg.role,
                content=content,
                parts=parts,
                tool_calls=calls,
                reasoning_content="".join(reasoning),
                **common,
            )
        )
    if msg.id:
        for n, flat in enumerate(out[1:], start=1):
            flat.id = f"{msg.id}#{n}"
    return out


def to_agentic(messages: Iterable[Message]) -> list[AgenticMessage]:
    """Messages of any kind as agentic messages (agentic ones pass through unchanged)."""
    return [m if m.kind == "agentic" else flat_to_agentic(m) for m in messages]


def to_flat(messages: Iterable[Message]) -> list[FlatMessage]:
    """Messages of any kind as flat messages (flat ones pass through unchanged)."""
    out: list[FlatMessage] = []
    for m in messages:
        if m.kind == "flat":
            out.append(m)
        else:
            out.extend(agentic_to_flat(m))
    return out


def to_kind(messages: Iterable[Message], kind: MessageKind) -> list[Message]:
    """Messages converted to `kind`."""
    return list(to_flat(messages) if kind == "flat" else to_agentic(messages))
