"""An MCP tool result as hookmesh tool output: text and media blocks, and whether it failed."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp.types as mcp_types

from hookmesh.schema import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    InlineSource,
    TextBlock,
    ToolOutputBlock,
    UrlSource,
    VideoBlock,
)

_BY_PREFIX: tuple[tuple[str, type[ImageBlock | AudioBlock | VideoBlock]], ...] = (
    ("image/", ImageBlock),
    ("audio/", AudioBlock),
    ("video/", VideoBlock),
)


def _media(data: bytes, mime_type: str, name: str = "") -> ToolOutputBlock:
    """Bytes as the media block their type names (a document when it names none of them)."""
    source = InlineSource(data=data, mime_type=mime_type or "application/octet-stream")
    for prefix, block in _BY_PREFIX:
        if source.mime_type.startswith(prefix):
            return block(source=source, name=name)
    return DocumentBlock(source=source, name=name)


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the server sent media that is not base64") from None


def _block(item: Any) -> ToolOutputBlock:
    if isinstance(item, mcp_types.TextContent):
        return TextBlock(text=item.text)
    if isinstance(item, mcp_types.ImageContent | mcp_types.AudioContent):
        return _media(_decode(item.data), item.mime_type)
    if isinstance(item, mcp_types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return TextBlock(text=resource.text)
        return _media(_decode(resource.blob), resource.mime_type or "", str(resource.uri))
    if isinstance(item, mcp_types.ResourceLink):
        source = UrlSource(url=str(item.uri), mime_type=item.mime_type or "")
        return DocumentBlock(source=source, name=item.name)
    return TextBlock(text=json.dumps(item.model_dump(mode="json", by_alias=True)))


def result_blocks(result: mcp_types.CallToolResult) -> tuple[list[ToolOutputBlock], bool]:
    """The result's content in order (text, images, audio, embedded resources, resource links),
    its structured content as JSON text when there is no other content, and whether the tool
    succeeded (``isError`` false).

    Raises:
        ValueError: Media that is not base64.
    """
    blocks = [_block(item) for item in result.content]
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    return blocks, not result.is_error
