"""Messages as OpenTelemetry GenAI message parts (gen_ai.input.messages and friends), for
the tracing middleware's opt-in content capture. Media are references, never bytes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from hookmesh.schema import (
    Message,
    ToolCall,
    is_system,
    is_tool_result,
    is_user,
    reasoning_of,
    text_of,
    tool_calls,
    tool_results,
)

_MODALITIES = ("image", "audio", "video")


def media_part(block: Any) -> dict[str, Any]:
    """A media block as a reference part: its URL (``uri``), or for inline bytes a content
    hash and size (``file``) — the bytes themselves never go into a span."""
    part: dict[str, Any] = {"mime_type": block.source.mime_type}
    if block.type in _MODALITIES:
        part["modality"] = block.type
    if block.source.type == "url":
        return {"type": "uri", "uri": block.source.url, **part}
    data = block.source.data
    digest = hashlib.sha256(data).hexdigest()[:32]
    return {"type": "file", "file_id": f"sha256:{digest}", "size": len(data), **part}


def _media(msg: Message) -> list[Any]:
    """The message's own media (not a tool result's)."""
    if msg.kind == "flat":
        return [] if msg.role == "tool" else [p for p in msg.parts if p.type != "text"]
    return [b for b in msg.blocks if b.type in (*_MODALITIES, "document")]


def message_parts(msg: Message) -> list[dict[str, Any]]:
    """One message's parts: reasoning, text, media, tool calls, tool results."""
    parts: list[dict[str, Any]] = []
    if reasoning := reasoning_of(msg):
        parts.append({"type": "reasoning", "content": reasoning})
    if text := text_of(msg):
        parts.append({"type": "text", "content": text})
    parts.extend(media_part(b) for b in _media(msg))
    parts.extend(call_part(c) for c in tool_calls(msg))
    for result in tool_results(msg):
        parts.append(
            {
                "type": "tool_call_response",
                "id": result.call_id,
                "response": result.text,
                "media": [media_part(o) for o in result.output if o.type != "text"],
            }
        )
    return parts


def call_part(call: ToolCall) -> dict[str, Any]:
    """A tool call as a tool_call part (arguments parsed when they are JSON)."""
    try:
        arguments: Any = json.loads(call.arguments) if call.arguments else {}
    except json.JSONDecodeError:
        arguments = call.arguments
    return {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}


def _role(msg: Message) -> str:
    # A message carrying only tool results speaks as the tool (an agentic user message too).
    if is_tool_result(msg) and not is_user(msg):
        return "tool"
    return msg.role


def input_messages(messages: Sequence[Message]) -> tuple[str, str]:
    """``gen_ai.system_instructions`` and ``gen_ai.input.messages`` as JSON text."""
    system = [{"type": "text", "content": text_of(m)} for m in messages if is_system(m)]
    rest = [{"role": _role(m), "parts": message_parts(m)} for m in messages if not is_system(m)]
    return _dumps(system), _dumps(rest)


def output_message(parts: list[dict[str, Any]], finish_reason: str) -> str:
    """``gen_ai.output.messages`` for one assistant answer, as JSON text."""
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if finish_reason:
        message["finish_reason"] = finish_reason
    return _dumps([message])


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
