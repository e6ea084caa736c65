"""A2A parts ⇄ hookmesh content blocks: text, files (bytes or URL) and data, nothing lost."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from a2a.types import a2a_pb2
from google.protobuf import json_format, struct_pb2

from hookmesh.schema import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    InlineSource,
    TextBlock,
    UrlSource,
    VideoBlock,
)

DATA_MIME = "application/json"
"""A data part travels as a document block of this type (its JSON as the bytes)."""
_OCTETS = "application/octet-stream"
_MEDIA: tuple[tuple[str, type[ImageBlock | AudioBlock | VideoBlock]], ...] = (
    ("image/", ImageBlock),
    ("audio/", AudioBlock),
    ("video/", VideoBlock),
)


def _media(source: InlineSource | UrlSource, name: str) -> ContentBlock:
    for prefix, block in _MEDIA:
        if source.mime_type.startswith(prefix):
            return block(source=source, name=name)
    return DocumentBlock(source=source, name=name)


def block_from_part(part: a2a_pb2.Part) -> ContentBlock:
    """One part as a block: text → text; bytes or a URL → image, audio or video by media
    type, else document; data → a document of type ``application/json``."""
    arm = part.WhichOneof("content")
    if arm == "raw":
        return _media(
            InlineSource(data=part.raw, mime_type=part.media_type or _OCTETS), part.filename
        )
    if arm == "url":
        return _media(UrlSource(url=part.url, mime_type=part.media_type), part.filename)
    if arm == "data":
        value = json_format.MessageToDict(part.data)
        data = json.dumps(value, ensure_ascii=False).encode()
        return DocumentBlock(
            source=InlineSource(data=data, mime_type=DATA_MIME), name=part.filename
        )
    return TextBlock(text=part.text)


def blocks_from_parts(parts: Iterable[a2a_pb2.Part]) -> list[ContentBlock]:
    """Every part as a block, in order."""
    return [block_from_part(p) for p in parts]


def data_part(value: Any) -> a2a_pb2.Part:
    """A data part holding the JSON value `value`."""
    wrapped = struct_pb2.Value()
    json_format.ParseDict(value, wrapped)
    return a2a_pb2.Part(data=wrapped, media_type=DATA_MIME)


def part_from_block(block: ContentBlock) -> a2a_pb2.Part | None:
    """A block as a part, or None for blocks that are not content (reasoning, tool calls and
    results, hints): text → text; media → bytes or URL with its media type and name; a JSON
    document → data."""
    if block.type == "text":
        return a2a_pb2.Part(text=block.text)
    if block.type not in ("image", "audio", "video", "document"):
        return None
    source = block.source
    if isinstance(source, UrlSource):
        return a2a_pb2.Part(url=source.url, media_type=source.mime_type, filename=block.name)
    if block.type == "document" and source.mime_type == DATA_MIME:
        try:
            part = data_part(json.loads(source.data))
        except ValueError:
            part = None
        if part is not None:
            part.filename = block.name
            return part
    return a2a_pb2.Part(raw=source.data, media_type=source.mime_type, filename=block.name)


def parts_from_blocks(blocks: Sequence[ContentBlock]) -> list[a2a_pb2.Part]:
    """Every content block as a part, in order."""
    return [p for p in (part_from_block(b) for b in blocks) if p is not None]


def text_of_parts(parts: Iterable[a2a_pb2.Part]) -> str:
    """The text parts joined."""
    return "".join(p.text for p in parts if p.WhichOneof("content") == "text")


def data_of_parts(parts: Iterable[a2a_pb2.Part]) -> list[Any]:
    """The data parts' values."""
    return [json_format.MessageToDict(p.data) for p in parts if p.WhichOneof("content") == "data"]
