"""Decoding AG-UI message JSON into an agentic message, recording every bad field."""

from __future__ import annotations

import base64
from typing import Any

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
from hookmesh.schema._messages import AgenticMessage, AgenticRole

AGUI_METADATA_KEY = "hookmesh.agui"
"""Message metadata key holding what AG-UI says and the hookmesh kind cannot: ``role``
("developer"), ``toolErrors`` (tool call id → AG-UI ``error`` text), ``contentParts`` (the
length, 0 or 1, of a ``content`` list that would otherwise encode as a string: empty, or one
text part)
and, on flat messages, ``encryptedValue`` (a reasoning message's opaque value; agentic
messages keep it in `ReasoningBlock.signature`). It never appears in encoded AG-UI
``metadata``."""

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


def _collapses(value: Any) -> bool:
    """A content part list the encoder would write as a string (so the list form is kept)."""
    if not isinstance(value, list) or len(value) > 1:
        return False
    return not value or (isinstance(value[0], dict) and value[0].get("type") == "text")


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
        if _collapses(data.get("content")):
            stash["contentParts"] = len(data["content"])
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
        if _collapses(data.get("content")):
            stash["contentParts"] = len(data["content"])
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
