"""What continues a paused reply: the user's confirmations and the caller's tool results."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hookmesh.schema._blocks import ToolOutputBlock, ToolResultState


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Confirmation(_Model):
    """The user's answer for one call awaiting confirmation."""

    call_id: str
    """The call answered."""
    confirmed: bool
    """Run it (True) or deny it (False)."""
    reason: str = ""
    """Why it was denied; shown to the model."""
    arguments: str | None = None
    """An edit: run the call with these JSON object arguments instead of the model's (only
    with `confirmed`). They are validated against the tool's schema, and the context then
    records the call as it ran (the model's arguments stay in the assistant message's
    metadata under ``hookmesh.edited_tool_calls``)."""


class ExternalResult(_Model):
    """The caller's result for one externally executed call."""

    call_id: str
    """The call answered."""
    output: str | list[ToolOutputBlock] = ""
    """What the tool returned."""
    state: ToolResultState = "success"
    """How the call ended."""


class Resume(_Model):
    """What continues a paused reply."""

    confirmations: list[Confirmation] = Field(default_factory=list)
    """Answers for the calls awaiting confirmation."""
    external_results: list[ExternalResult] = Field(default_factory=list)
    """Results for the calls awaiting external execution."""
