"""The two message kinds, flat and agentic, as one tagged union."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from hookmesh.schema._blocks import ContentBlock, ToolOutputBlock, ToolResultState, _Model

MessageKind = Literal["flat", "agentic"]
"""The two message kinds; an agent's whole context uses one."""

FlatRole = Literal["system", "user", "assistant", "tool"]
"""Speakers of a flat message."""

AgenticRole = Literal["system", "user", "assistant"]
"""Speakers of an agentic message: no tool role, tool results live in user messages."""


class Usage(_Model):
    """Token counts of one model call or message."""

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cache_read_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    cache_creation_tokens: int = 0
    """Prompt tokens written to the provider's cache."""
    reasoning_tokens: int = 0
    """Completion tokens spent on reasoning."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ToolCall(_Model):
    """One tool call of a flat assistant message (also the neutral form helpers return)."""

    id: str
    """Call id, unique within the conversation."""
    name: str
    """Tool name."""
    arguments: str = ""
    """Arguments as JSON object text."""


class _MessageBase(_Model):
    id: str = ""
    """Message id, unique within its session; empty until someone assigns one."""
    metadata: dict[str, Any] | None = None
    """Free-form JSON metadata (e.g. a summary tag); numbers travel as doubles in protobuf."""
    create_time: datetime | None = None
    """When the message was created (timezone-aware)."""
    name: str = ""
    """Participant name, e.g. the agent's."""
    usage: Usage | None = None
    """Tokens used to produce the message, when known."""


class FlatMessage(_MessageBase):
    """Role, content string and side fields, like OpenAI Chat Completions."""

    kind: Literal["flat"] = "flat"
    role: FlatRole
    """Who speaks."""
    content: str = ""
    """The text content."""
    parts: list[ToolOutputBlock] = Field(default_factory=list)
    """Multimodal content after `content`: text and media blocks."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls requested by an assistant message."""
    tool_call_id: str = ""
    """Role tool: the call this answers (required there)."""
    tool_name: str = ""
    """Role tool: the tool that ran."""
    tool_result_state: ToolResultState = "success"
    """Role tool: how the call ended."""
    reasoning_content: str = ""
    """Assistant reasoning text."""


class AgenticMessage(_MessageBase):
    """Role and ordered content blocks, like the Responses or Claude APIs."""

    kind: Literal["agentic"] = "agentic"
    role: AgenticRole
    """Who speaks; tool results are tool_result blocks in a user message."""
    blocks: list[ContentBlock] = Field(default_factory=list)
    """The content, in order."""


Message = Annotated[FlatMessage | AgenticMessage, Field(discriminator="kind")]
"""A message of either kind, tagged by `kind` (the proto `Message.kind` arm name)."""
