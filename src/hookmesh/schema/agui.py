"""AG-UI message JSON (camelCase dicts) to and from hookmesh messages of either kind."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any, get_args

from pydantic import ValidationError

from hookmesh.errors import FieldViolation, SchemaError
from hookmesh.schema._blocks import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    InlineSource,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolOutputBlock,
    ToolResultBlock,
    UrlSource,
    VideoBlock,
    _MediaBlock,
)
from hookmesh.schema._convert import agentic_to_flat
from hookmesh.schema._helpers import text_of
from hookmesh.schema._messages import AgenticMessage, AgenticRole, FlatMessage, Message, MessageKind

AGUI_METADATA_KEY = "hookmesh.agui"
"""Message metadata key holding what AG-UI says and the hookmesh kind cannot: ``role``
("developer"), ``toolErrors`` (tool call id → AG-UI ``error`` text) and, on flat messages,
``encryptedValue`` (a reasoning message's opaque value; agentic messages keep it in
`ReasoningBlock.signature`). It never appears in encoded AG-UI ``metadata``."""

_MEDIA: dict[str, type[_MediaBlock]] = {
    "image": ImageBlock,
    "audio": AudioBlock,
    "video": VideoBlock,
    "document": DocumentBlock,
}
_ROLES = ("developer", "system", "user", "assistant", "tool", "reasoning", "activity")
# AG-UI has one failure flag (`error`); the text a failed hookmesh result gets without one.
_STATE_ERRORS = {
    "error": "tool call failed",
    "interrupted": "tool call was interrupted",
    "denied": "tool call was denied",
}

_Json = dict[str, Any]


# --- decoding helpers: each records a violation per bad field and returns None -----------


def _str(
    obj: _Json,
    key: str,
    path: str,
    errs: list[FieldViolation],
    *,
    required: bool = False,
    nonempty: bool = False,
) -> str | None:
    """`obj[key]` as a string; None (plus a violation when wrong) if absent or invalid."""
    value = obj.get(key)
    if value is None:
        if required:
            errs.append(FieldViolation(f"{path}.{key}", f"`{key}` is required"))
        return None
    if not isinstance(value, str):
        errs.append(FieldViolation(f"{path}.{key}", f"`{key}` must be a string"))
        return None
    if nonempty and not value:
        errs.append(FieldViolation(f"{path}.{key}", f"`{key}` must not be empty"))
        return None
    return value


def _obj(obj: _Json, key: str, path: str, errs: list[FieldViolation]) -> _Json | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, dict):
        errs.append(FieldViolation(f"{path}.{key}", f"`{key}` must be a JSON object"))
        return None
    return value


def _b64(value: str, path: str, errs: list[FieldViolation]) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        errs.append(FieldViolation(path, "must be standard padded base64 (RFC 4648)"))
        return None


def _source(src: Any, path: str, errs: list[FieldViolation]) -> InlineSource | UrlSource | None:
    if not isinstance(src, dict):
        errs.append(FieldViolation(path, "a media part needs a `source` object"))
        return None
    kind = src.get("type")
    if kind == "data":
        value = _str(src, "value", path, errs, required=True)
        mime = _str(src, "mimeType", path, errs, required=True, nonempty=True)
        data = None if value is None else _b64(value, f"{path}.value", errs)
        return None if data is None or mime is None else InlineSource(data=data, mime_type=mime)
    if kind == "url":
        url = _str(src, "value", path, errs, required=True, nonempty=True)
        mime = _str(src, "mimeType", path, errs) or ""
        return None if url is None else UrlSource(url=url, mime_type=mime)
    errs.append(FieldViolation(f"{path}.type", "a source `type` must be `data` or `url`"))
    return None


def _binary(part: _Json, path: str, errs: list[FieldViolation]) -> _MediaBlock | None:
    """The legacy ``binary`` part: the block kind follows the mime type's top-level type."""
    mime = _str(part, "mimeType", path, errs, required=True, nonempty=True)
    data = _str(part, "data", path, errs)
    url = _str(part, "url", path, errs, nonempty=True)
    upload_id = _str(part, "id", path, errs)
    name = _str(part, "filename", path, errs) or ""
    source: InlineSource | UrlSource | None = None
    if data is not None:
        raw = _b64(data, f"{path}.data", errs)
        source = None if raw is None else InlineSource(data=raw, mime_type=mime or "")
    elif url is not None:
        source = UrlSource(url=url, mime_type=mime or "")
    elif upload_id is not None:
        errs.append(
            FieldViolation(
                f"{path}.id", "an upload id cannot be resolved here: send `data` or a `url`"
            )
        )
    elif "url" not in part:
        errs.append(FieldViolation(path, "a binary part needs `data` or `url`"))
    if source is None or mime is None:
        return None
    top = mime.split("/", 1)[0].lower()
    return _MEDIA.get(top, DocumentBlock)(source=source, name=name)


def _part(part: Any, path: str, errs: list[FieldViolation]) -> ToolOutputBlock | None:
    if not isinstance(part, dict):
        errs.append(FieldViolation(path, "a content part must be a JSON object"))
        return None
    kind = part.get("type")
    if kind == "text":
        text = _str(part, "text", path, errs, required=True)
        return None if text is None else TextBlock(text=text)
    if kind == "binary":
        return _binary(part, path, errs)  # type: ignore[return-value]
    if isinstance(kind, str) and kind in _MEDIA:
        source = _source(part.get("source"), f"{path}.source", errs)
        metadata = _obj(part, "metadata", path, errs)
        if source is None:
            return None
        return _MEDIA[kind](source=source, metadata=metadata)  # type: ignore[return-value]
    errs.append(
        FieldViolation(
            f"{path}.type",
            f"unknown content part type {kind!r}: use text, image, audio, video or document",
        )
    )
    return None


def _content(data: _Json, path: str, errs: list[FieldViolation]) -> list[ToolOutputBlock]:
    """User or tool ``content``: a string or a list of content parts (required)."""
    value = data.get("content")
    if isinstance(value, str):
        return [TextBlock(text=value)] if value else []
    if not isinstance(value, list):
        why = "is required" if value is None else "must be a string or a list of content parts"
        errs.append(FieldViolation(f"{path}.content", f"`content` {why}"))
        return []
    parts = [_part(p, f"{path}.content[{i}]", errs) for i, p in enumerate(value)]
    return [p for p in parts if p is not None]


def _tool_calls(value: Any, path: str, errs: list[FieldViolation]) -> list[ToolCallBlock]:
    if value is None:
        return []
    if not isinstance(value, list):
        errs.append(FieldViolation(path, "`toolCalls` must be a list"))
        return []
    out: list[ToolCallBlock] = []
    for i, call in enumerate(value):
        p = f"{path}[{i}]"
        if not isinstance(call, dict):
            errs.append(FieldViolation(p, "a tool call must be a JSON object"))
            continue
        call_id = _str(call, "id", p, errs, required=True, nonempty=True)
        if call.get("type", "function") != "function":
            errs.append(FieldViolation(f"{p}.type", "a tool call `type` must be `function`"))
        fn = call.get("function")
        if not isinstance(fn, dict):
            errs.append(FieldViolation(f"{p}.function", "a tool call needs a `function` object"))
            continue
        name = _str(fn, "name", f"{p}.function", errs, required=True, nonempty=True)
        arguments = _str(fn, "arguments", f"{p}.function", errs) or ""
        if call_id is not None and name is not None:
            out.append(ToolCallBlock(call_id=call_id, name=name, arguments=arguments))
    return out


def _decode(data: Any, path: str) -> AgenticMessage:
    """One AG-UI message as an agentic message (the kind that holds every AG-UI field)."""
    if not isinstance(data, dict):
        raise SchemaError.single(path, "a message must be a JSON object")
    errs: list[FieldViolation] = []
    msg_id = _str(data, "id", path, errs) or ""
    name = _str(data, "name", path, errs) or ""
    metadata = _obj(data, "metadata", path, errs)
    if metadata is not None and AGUI_METADATA_KEY in metadata:
        errs.append(
            FieldViolation(f"{path}.metadata", f"the key {AGUI_METADATA_KEY!r} is reserved")
        )
    stash: _Json = {}
    role: AgenticRole = "user"
    blocks: list[ContentBlock] = []
    agui_role = data.get("role")
    if agui_role in ("system", "developer"):
        role = "system"
        text = _str(data, "content", path, errs, required=True)
        blocks = [TextBlock(text=text)] if text else []
        if agui_role == "developer":
            stash["role"] = "developer"
    elif agui_role == "user":
        blocks = list(_content(data, path, errs))
    elif agui_role == "assistant":
        role = "assistant"
        text = _str(data, "content", path, errs)
        blocks = [TextBlock(text=text)] if text else []
        blocks.extend(_tool_calls(data.get("toolCalls"), f"{path}.toolCalls", errs))
    elif agui_role == "tool":
        call_id = _str(data, "toolCallId", path, errs, required=True, nonempty=True) or ""
        output = _content(data, path, errs)
        error = _str(data, "error", path, errs)
        if error is not None:
            stash["toolErrors"] = {call_id: error}
        blocks = [
            ToolResultBlock(
                call_id=call_id, output=output, state="success" if error is None else "error"
            )
        ]
    elif agui_role == "reasoning":
        role = "assistant"
        text = _str(data, "content", path, errs, required=True) or ""
        signature = _str(data, "encryptedValue", path, errs) or ""
        blocks = [ReasoningBlock(text=text, signature=signature)]
    elif agui_role == "activity":
        errs.append(
            FieldViolation(f"{path}.role", "unsupported role `activity`: it is UI state, not chat")
        )
    elif agui_role is None:
        errs.append(FieldViolation(f"{path}.role", "`role` is required"))
    else:
        errs.append(
            FieldViolation(
                f"{path}.role", f"unknown role {agui_role!r}: use one of {', '.join(_ROLES)}"
            )
        )
    if errs:
        raise SchemaError(errs)
    if stash:
        metadata = {**(metadata or {}), AGUI_METADATA_KEY: stash}
    try:
        return AgenticMessage(id=msg_id, role=role, blocks=blocks, name=name, metadata=metadata)
    except ValidationError as exc:  # e.g. metadata a Python caller built with non-str keys
        raise SchemaError.single(path, f"not representable: {exc.errors()[0]['msg']}") from None


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


def _content_to_agui(flat: FlatMessage) -> str | list[_Json]:
    """A plain string when the content is one text (or nothing), else a content part list."""
    blocks: list[ToolOutputBlock] = [TextBlock(text=flat.content)] if flat.content else []
    blocks.extend(flat.parts)
    if not blocks:
        return ""
    if len(blocks) == 1 and blocks[0].type == "text":
        return blocks[0].text
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
            "content": _content_to_agui(flat),
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
            {"id": flat.id, "role": "user", "content": _content_to_agui(flat), **named, **common}
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
    becomes a plain string, other user content an InputContent list (bytes base64 encoded);
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
