"""AG-UI message JSON (camelCase dicts) to and from hookmesh messages of either kind."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any, get_args

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema._agui_decode import (
    _STATE_ERRORS,
    AGUI_METADATA_KEY,
    _decode,
    _Json,
)
from hookmesh.schema._blocks import (
    ReasoningBlock,
    TextBlock,
    ToolOutputBlock,
)
from hookmesh.schema._convert import agentic_to_flat
from hookmesh.schema._helpers import text_of
from hookmesh.schema._messages import FlatMessage, Message, MessageKind


def _stash(msg: Message) -> _Json:
    value = (msg.metadata or {}).get(AGUI_METADATA_KEY)
    return value if isinstance(value, dict) else {}


def message_from_agui(data: _Json, kind: MessageKind, path: str = "messages[0]") -> Message:
    """Decode one AG-UI message into a hookmesh message of `kind`.

    Roles map as: system and developer → system (``developer`` kept in metadata under
    `AGUI_METADATA_KEY`); user → user; assistant → assistant (content, toolCalls); tool →
    flat tool message / agentic user message holding one tool_result (``error`` present →
    state ``error``, its text kept under the metadata key); reasoning → an assistant message
    holding only reasoning (``encryptedValue`` → `ReasoningBlock.signature`; a flat message has
    no signature field, so it is kept under the metadata key). ``id``, ``name`` and
    ``metadata`` map to the message fields of the same names. Media parts (and the legacy
    ``binary`` part) become media blocks, base64 decoded to bytes; a document stays a
    document block.

    Args:
        data: The AG-UI message, a JSON object with camelCase keys.
        kind: The message kind to produce.
        path: The JSON path of `data`, used in violation fields.

    Returns:
        The decoded message.

    Raises:
        SchemaError: `data` is not a valid AG-UI message or has the ``activity`` role; every
            violation of the message is listed, each field being a JSON path such as
            ``messages[0].content[1].source.mimeType``.
    """
    if kind not in get_args(MessageKind):
        raise ValueError(f"unknown message kind {kind!r}")
    msg = _decode(data, path)
    if kind == "agentic":
        return msg
    [flat] = agentic_to_flat(msg)
    signature = next((b.signature for b in msg.blocks if isinstance(b, ReasoningBlock)), "")
    if signature:
        flat.metadata = {
            **(flat.metadata or {}),
            AGUI_METADATA_KEY: {**_stash(flat), "encryptedValue": signature},
        }
    return flat


def messages_from_agui(
    data: Sequence[_Json], kind: MessageKind, path: str = "messages"
) -> list[Message]:
    """Decode a list of AG-UI messages, collecting the violations of all of them.

    Args:
        data: The AG-UI messages (e.g. ``RunAgentInput.messages``).
        kind: The message kind to produce.
        path: The JSON path of the list, used in violation fields.

    Returns:
        One hookmesh message per AG-UI message, in order.

    Raises:
        SchemaError: Some message is invalid; lists the violations of every message.
    """
    if not isinstance(data, list):
        raise SchemaError.single(path, "messages must be a list")
    out: list[Message] = []
    violations: list[FieldViolation] = []
    for i, item in enumerate(data):
        try:
            out.append(message_from_agui(item, kind, f"{path}[{i}]"))
        except SchemaError as exc:
            violations.extend(exc.violations)
    if violations:
        raise SchemaError(violations)
    return out


# --- encoding ----------------------------------------------------------------------------


def _part_to_agui(block: ToolOutputBlock) -> _Json:
    if block.type == "text":
        return {"type": "text", "text": block.text}
    src = block.source
    source: _Json
    if src.type == "inline":
        value = base64.b64encode(src.data).decode("ascii")
        source = {"type": "data", "value": value, "mimeType": src.mime_type}
    else:
        source = {"type": "url", "value": src.url}
        if src.mime_type:
            source["mimeType"] = src.mime_type
    out: _Json = {"type": block.type, "source": source}
    if block.metadata is not None:
        out["metadata"] = block.metadata
    return out


def _content_to_agui(flat: FlatMessage, parts: Any) -> str | list[_Json]:
    """A plain string when the content is one text (or nothing), else a content part list;
    always a list when `parts` (the stashed length of a decoded list) is set."""
    blocks: list[ToolOutputBlock] = [TextBlock(text=flat.content)] if flat.content else []
    blocks.extend(flat.parts)
    if parts is None and not blocks:
        return ""
    if parts is None and len(blocks) == 1 and blocks[0].type == "text":
        return blocks[0].text
    if parts == 1 and not blocks:
        return [{"type": "text", "text": ""}]
    return [_part_to_agui(b) for b in blocks]


def _text_to_agui(flat: FlatMessage, path: str) -> str:
    media = [p.type for p in flat.parts if p.type != "text"]
    if media:
        raise SchemaError.single(
            path, f"an AG-UI {flat.role} message holds text only, not {media[0]} content"
        )
    return text_of(flat)


def _flat_to_agui(flat: FlatMessage, signature: str, has_reasoning: bool, path: str) -> list[_Json]:
    stash = _stash(flat)
    parts = stash.get("contentParts")
    common: _Json = {}
    metadata = {k: v for k, v in (flat.metadata or {}).items() if k != AGUI_METADATA_KEY}
    if metadata:
        common["metadata"] = metadata
    named = {"name": flat.name} if flat.name else {}
    if flat.role != "assistant" and (flat.tool_calls or flat.reasoning_content):
        raise SchemaError.single(path, "only assistant messages carry tool calls or reasoning")
    if flat.role == "tool":
        out: _Json = {
            "id": flat.id,
            "role": "tool",
            "content": _content_to_agui(flat, parts),
            "toolCallId": flat.tool_call_id,
            **common,
        }
        if flat.tool_result_state != "success":
            errors = stash.get("toolErrors")
            kept = errors.get(flat.tool_call_id) if isinstance(errors, dict) else None
            out["error"] = kept if isinstance(kept, str) else _STATE_ERRORS[flat.tool_result_state]
        return [out]
    if flat.role == "user":
        return [
            {
                "id": flat.id,
                "role": "user",
                "content": _content_to_agui(flat, parts),
                **named,
                **common,
            }
        ]
    text = _text_to_agui(flat, path)
    if flat.role == "system":
        role = "developer" if stash.get("role") == "developer" else "system"
        return [{"id": flat.id, "role": role, "content": text, **named, **common}]
    messages: list[_Json] = []
    if flat.reasoning_content or has_reasoning:
        split = bool(text or flat.tool_calls)
        reasoning: _Json = {
            "id": f"{flat.id}#reasoning" if split and flat.id else flat.id,
            "role": "reasoning",
            "content": flat.reasoning_content,
            **common,
        }
        if signature:
            reasoning["encryptedValue"] = signature
        messages.append(reasoning)
    if text or flat.tool_calls or not messages:
        out = {"id": flat.id, "role": "assistant", **named, **common}
        if text:
            out["content"] = text
        if flat.tool_calls:
            out["toolCalls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in flat.tool_calls
            ]
        messages.append(out)
    return messages


def _encode(msg: Message, path: str) -> list[_Json]:
    """Go through the flat kind: agentic_to_flat already splits tool results off."""
    stashed = str(_stash(msg).get("encryptedValue") or "")
    if msg.kind == "flat":
        flats = [msg]
        signature = stashed
        has_reasoning = bool(msg.reasoning_content or signature)
    else:
        flats = agentic_to_flat(msg)
        reasoning = [b for b in msg.blocks if isinstance(b, ReasoningBlock)]
        signature = next((b.signature for b in reversed(reasoning) if b.signature), stashed)
        has_reasoning = bool(reasoning)
    return [m for f in flats for m in _flat_to_agui(f, signature, has_reasoning, path)]


def message_to_agui(msg: Message) -> _Json:
    """Encode a hookmesh message of either kind as one AG-UI message.

    The inverse of `message_from_agui`: a user message whose content is one text block
    becomes a plain string (unless it was decoded from a list: the form decoded is kept),
    other user content an InputContent list (bytes base64 encoded);
    assistant text becomes ``content`` (omitted when empty) and its calls ``toolCalls``.
    AG-UI has no field for create_time, usage, block ids, media names, a tool result's tool
    name, or the interrupted and denied states (they become ``error`` with a fixed text);
    several reasoning blocks merge into one reasoning message with the last signature.

    Args:
        msg: The message to encode.

    Returns:
        The AG-UI message, a JSON object with camelCase keys.

    Raises:
        SchemaError: AG-UI cannot hold the message as one message (an agentic user message
            with tool results next to other content, or an assistant message with both
            reasoning and an answer: use `messages_to_agui`), or it has media where AG-UI
            allows only text (system and assistant messages).
    """
    out = _encode(msg, "message")
    if len(out) != 1:
        roles = ", ".join(m["role"] for m in out)
        raise SchemaError.single(
            "message", f"this message is {len(out)} AG-UI messages ({roles}): use messages_to_agui"
        )
    return out[0]


def messages_to_agui(messages: Iterable[Message]) -> list[_Json]:
    """Encode hookmesh messages of either kind as AG-UI messages.

    Like `message_to_agui`, except that one message may become several AG-UI messages: an
    agentic user message becomes one tool message per tool result, then a user message for
    the rest (ids ``{id}#{n}`` after the first, as `agentic_to_flat` assigns); an assistant
    message with reasoning and an answer becomes a reasoning message (id
    ``{id}#reasoning``) and then the assistant message.

    Args:
        messages: The messages to encode.

    Returns:
        The AG-UI messages, in order.

    Raises:
        SchemaError: Some message has media where AG-UI allows only text; lists all of them.
    """
    out: list[_Json] = []
    violations: list[FieldViolation] = []
    for i, msg in enumerate(messages):
        try:
            out.extend(_encode(msg, f"messages[{i}]"))
        except SchemaError as exc:
            violations.extend(exc.violations)
    if violations:
        raise SchemaError(violations)
    return out
