"""Per-reply bookkeeping of the agent loop, and the ids it hands out."""

from __future__ import annotations

import asyncio
import os

from hookmesh.schema import AgentEvent, Message, ReplyEndEvent

DEFAULT_MAX_ITERS = 20


def new_id() -> str:
    """A fresh random id (32 hex characters, 128 random bits)."""
    return os.urandom(16).hex()


class ReplyRun:
    """Per-reply bookkeeping, created once per reply and dropped when it ends."""

    __slots__ = (
        "blocks",
        "cancelled",
        "direct_call_id",
        "end",
        "final",
        "inside",
        "interrupted",
        "max_iters",
        "message",
        "model_name",
        "outbox",
        "paused",
        "reply_id",
        "start",
        "system",
        "task",
        "tool_choice",
    )

    def __init__(self, reply_id: str) -> None:
        self.reply_id = reply_id
        self.blocks = 0
        self.cancelled = False
        self.inside = False
        self.end: ReplyEndEvent | None = None
        self.final: Message | None = None
        self.interrupted = False
        self.message: Message | None = None
        self.model_name = ""
        """The model that answered the current call (a middleware may call another)."""
        self.outbox: list[AgentEvent] = []
        self.paused = False
        self.direct_call_id = ""
        self.start = 0
        self.system: Message | None = None
        self.task = asyncio.current_task()
        self.tool_choice = "auto"
        self.max_iters = DEFAULT_MAX_ITERS

    def block_id(self) -> str:
        self.blocks += 1
        return f"{self.reply_id}-{self.blocks}"


def drain(outbox: list[AgentEvent]) -> list[AgentEvent]:
    events = outbox[:]
    outbox.clear()
    return events
