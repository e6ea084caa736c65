"""Semantic checks shared by every encoding: what a well-formed message may hold."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema._blocks import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    InlineSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UrlSource,
    VideoBlock,
)
from hookmesh.schema._messages import AgenticMessage, FlatMessage, Message

_MEDIA = frozenset({"image", "audio", "video", "document"})
# Which block types each agentic role may hold.
_ALLOWED = {
    "system": frozenset({"text", "hint"}),
    "user": frozenset({"text", "hint", "tool_result"}) | _MEDIA,
    "assistant": frozenset({"text", "reasoning", "tool_call"}) | _MEDIA,
}


def _source(source: InlineSource | UrlSource, path: str) -> list[FieldViolation]:
    if source.type == "inline":
        if not source.mime_type:
            return [
                FieldViolation(f"{path}.source.inline.mime_type", "inline data needs a mime_type")
            ]
        return []
    if not source.url:
        return [FieldViolation(f"{path}.source.url.url", "a URL source needs a non-empty url")]
    return []


def _blocks(blocks: Iterable[ContentBlock], path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    for i, block in enumerate(blocks):
        p = f"{path}[{i}].{block.type}"
        if isinstance(block, ImageBlock | AudioBlock | VideoBlock | DocumentBlock):
            out.extend(_source(block.source, p))
        elif isinstance(block, ToolCallBlock):
            if not block.call_id:
                out.append(FieldViolation(f"{p}.call_id", "a tool call needs a call_id"))
            if not block.name:
                out.append(FieldViolation(f"{p}.name", "a tool call needs a tool name"))
        elif isinstance(block, ToolResultBlock):
            if not block.call_id:
                out.append(
                    FieldViolation(f"{p}.call_id", "a tool result needs the call_id it answers")
                )
            out.extend(_blocks(block.output, f"{p}.output"))
    return out


def _flat(msg: FlatMessage, path: str) -> list[FieldViolation]:
    out = _blocks(msg.parts, f"{path}.parts")
    if msg.role == "system":
        # NOTE: as in the agentic kind, so that conversion maps valid messages to valid ones.
        out.extend(
            FieldViolation(
                f"{path}.parts[{i}].{p.type}", f"a system message cannot hold a {p.type} part"
            )
            for i, p in enumerate(msg.parts)
            if not isinstance(p, TextBlock)
        )
    if msg.role == "tool":
        if not msg.tool_call_id:
            out.append(
                FieldViolation(
                    f"{path}.tool_call_id", "a tool message needs the tool_call_id it answers"
                )
            )
    else:
        for name, value, default in (
            ("tool_call_id", msg.tool_call_id, ""),
            ("tool_name", msg.tool_name, ""),
            ("tool_result_state", msg.tool_result_state, "success"),
        ):
            if value != default:
                out.append(FieldViolation(f"{path}.{name}", f"only tool messages carry a {name}"))
    if msg.tool_calls and msg.role != "assistant":
        out.append(FieldViolation(f"{path}.tool_calls", "only assistant messages make tool calls"))
    for i, call in enumerate(msg.tool_calls):
        if not call.id:
            out.append(FieldViolation(f"{path}.tool_calls[{i}].id", "a tool call needs an id"))
        if not call.name:
            out.append(
                FieldViolation(f"{path}.tool_calls[{i}].name", "a tool call needs a tool name")
            )
    if msg.reasoning_content and msg.role != "assistant":
        out.append(
            FieldViolation(f"{path}.reasoning_content", "only assistant messages carry reasoning")
        )
    return out


def _agentic(msg: AgenticMessage, path: str) -> list[FieldViolation]:
    allowed = _ALLOWED[msg.role]
    out = [
        FieldViolation(
            f"{path}.blocks[{i}].{b.type}",
            f"a {msg.role} message cannot hold a {b.type} block"
            + (" (tool results go in user messages)" if b.type == "tool_result" else ""),
        )
        for i, b in enumerate(msg.blocks)
        if b.type not in allowed
    ]
    out.extend(_blocks(msg.blocks, f"{path}.blocks"))
    return out


def message_violations(msg: Message, path: str = "message") -> list[FieldViolation]:
    """Every rule `msg` breaks, with proto-style field paths (empty when it is well formed)."""
    if msg.kind == "flat":
        return _flat(msg, f"{path}.flat")
    return _agentic(msg, f"{path}.agentic")


def check_messages(messages: Sequence[Message], path: str = "messages") -> None:
    """Raise `SchemaError` listing every violation in `messages`."""
    violations: list[FieldViolation] = []
    for i, msg in enumerate(messages):
        violations.extend(message_violations(msg, f"{path}[{i}]"))
    if violations:
        raise SchemaError(violations)
