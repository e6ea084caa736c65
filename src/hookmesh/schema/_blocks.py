"""Content blocks: the ordered pieces of agentic messages, flat multimodal parts and tool output."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    """Base for every schema model: unknown fields are errors, assignment is allowed."""

    # Bytes travel as base64 in JSON (sessions, AG-UI-style logs, `chat --json`).
    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")


class InlineSource(_Model):
    """Media bytes carried in the message itself."""

    type: Literal["inline"] = "inline"
    data: bytes
    """The raw bytes (base64 only in JSON encodings such as AG-UI)."""
    mime_type: str
    """IANA media type of `data`, e.g. ``image/png``. Required."""


class UrlSource(_Model):
    """Media bytes the consumer fetches from a URL."""

    type: Literal["url"] = "url"
    url: str
    """Absolute URL."""
    mime_type: str = ""
    """IANA media type when known, else empty."""


MediaSource = Annotated[InlineSource | UrlSource, Field(discriminator="type")]
"""Where a media item's bytes are: inline or by URL."""


class TextBlock(_Model):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str
    """The text."""
    id: str = ""
    """Block id, unique within its message; empty when nobody needs to address the block."""


class ReasoningBlock(_Model):
    """Model reasoning, kept apart from the answer."""

    type: Literal["reasoning"] = "reasoning"
    text: str
    """The reasoning text."""
    signature: str = ""
    """Provider's opaque token to echo back with the reasoning; empty when none."""
    id: str = ""
    """Block id."""


class _MediaBlock(_Model):
    source: MediaSource
    """Where the bytes are."""
    name: str = ""
    """Display name, such as a file name."""
    metadata: dict[str, Any] | None = None
    """Free-form JSON metadata; numbers travel as doubles in protobuf."""
    id: str = ""
    """Block id."""

    @property
    def mime_type(self) -> str:
        """The media type of the source ('' when a URL source does not say)."""
        return self.source.mime_type


class ImageBlock(_MediaBlock):
    """An image."""

    type: Literal["image"] = "image"


class AudioBlock(_MediaBlock):
    """An audio clip."""

    type: Literal["audio"] = "audio"


class VideoBlock(_MediaBlock):
    """A video."""

    type: Literal["video"] = "video"


class DocumentBlock(_MediaBlock):
    """A document (PDF, text file, ...). Never downgraded to text."""

    type: Literal["document"] = "document"


MediaBlock = Annotated[
    ImageBlock | AudioBlock | VideoBlock | DocumentBlock, Field(discriminator="type")
]
"""Any media block."""

ToolOutputBlock = Annotated[
    TextBlock | ImageBlock | AudioBlock | VideoBlock | DocumentBlock,
    Field(discriminator="type"),
]
"""What a tool result or a flat message's parts may hold: text and media."""


class ToolCallBlock(_Model):
    """A tool call made by the assistant."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    """Id of the call; the matching result names it."""
    name: str
    """Tool name."""
    arguments: str = ""
    """Arguments as JSON object text (possibly invalid: models make mistakes)."""
    id: str = ""
    """Block id."""


ToolResultState = Literal["success", "error", "interrupted", "denied"]
"""How a tool call ended."""


class ToolResultBlock(_Model):
    """The outcome of one tool call; in agentic messages it sits in a user message."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    """The call this answers."""
    name: str = ""
    """The tool that ran."""
    output: list[ToolOutputBlock] = Field(default_factory=list)
    """What the tool returned: text and media blocks."""
    state: ToolResultState = "success"
    """How the call ended."""
    id: str = ""
    """Block id."""


class HintBlock(_Model):
    """Text a middleware injects for the model; the model reads it as user text."""

    type: Literal["hint"] = "hint"
    text: str
    """The hint."""
    source: str = ""
    """Who produced it, usually a middleware key."""
    id: str = ""
    """Block id; middlewares set it so they can remove their hint later."""


ContentBlock = Annotated[
    TextBlock
    | ReasoningBlock
    | ImageBlock
    | AudioBlock
    | VideoBlock
    | DocumentBlock
    | ToolCallBlock
    | ToolResultBlock
    | HintBlock,
    Field(discriminator="type"),
]
"""Any content block, tagged by `type` (the proto `ContentBlock.block` arm name)."""
