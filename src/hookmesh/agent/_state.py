"""The agent's serialisable state: context, middleware state, and a paused reply."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hookmesh.schema import Message, ToolCall


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OutputState(_Model):
    """A reply's structured output as saved with it, so a resumed or continued reply asks
    for the same shape the same way."""

    key: str
    """The output schema (`OutputSpec.key`: its name, schema, description, retries)."""
    strategy: Literal["native", "tool"]
    """How the model is asked, as chosen when the reply began."""
    failures: int = 0
    """Answers that did not validate so far."""


class PendingReply(_Model):
    """A reply paused for the user's confirmation or for external tool results, or, in a
    checkpoint (``awaiting="running"``), a reply that was running when its state was saved:
    another process continues it from there (`Agent.redrive`)."""

    reply_id: str
    """The paused reply; resume continues it under the same id."""
    iteration: int
    """The reasoning step that made the calls (max_iters counts on from here); -1 in a
    checkpoint taken before the first step."""
    awaiting: Literal["confirmation", "external", "running"]
    """What the reply waits for now; ``running``: nothing, it was cut off while running."""
    confirm_calls: list[ToolCall] = Field(default_factory=list)
    """Calls waiting for confirmation."""
    external_calls: list[ToolCall] = Field(default_factory=list)
    """Calls the caller must execute (asked for after confirmations are settled)."""
    direct_call_id: str = ""
    """A return-directly tool already answered this call in this step; its result ends
    the reply once the step completes."""
    started_calls: list[str] = Field(default_factory=list)
    """In a checkpoint: calls whose tool run had started and whose result the checkpoint
    lacks, so their effect may have happened (see `OutcomePolicy`)."""
    max_iters: int = 0
    """In a checkpoint: the reply's own step limit (0: the agent's)."""
    output: OutputState | None = None
    """The reply's structured output, when it asked for one."""
    blocks: int = 0
    """Content blocks the reply has opened so far: its continuation numbers new blocks on
    from here, so block ids never repeat within a reply (and a step run again after a cut
    gets the ids it had)."""


class AgentState(_Model):
    """Everything an agent needs to continue: JSON round-trips it, so a paused reply can
    resume in another process (`model_dump_json` / `model_validate_json`)."""

    context: list[Message] = Field(default_factory=list)
    """The conversation, in the agent's message kind (no system prompt: it is rebuilt)."""
    middle_context: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    """Middleware state: ``[middleware_key][reply_id] -> JSON object``."""
    pending: PendingReply | None = None
    """The paused reply, if any."""
