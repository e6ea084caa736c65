"""Per-reply bookkeeping of the agent loop, and the ids it hands out."""

from __future__ import annotations

import asyncio
import os

from hookmesh.agent._checkpoint import Checkpoint
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
        "checkpoint",
        "direct_call_id",
        "end",
        "final",
        "inside",
        "interrupted",
        "iteration",
        "max_iters",
        "message",
        "model_name",
        "outbox",
        "own_max_iters",
        "paused",
        "reply_id",
        "start",
        "started",
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
        self.own_max_iters: int | None = None
        """The reply's own step limit, when its request set one (kept in checkpoints)."""
        self.checkpoint: Checkpoint | None = None
        self.iteration = -1
        """The last step whose model response is in the context (-1: none yet)."""
        self.started: set[str] = set()
        """Calls whose tool run started and whose result is not yet in the context."""

    def block_id(self) -> str:
        self.blocks += 1
        return f"{self.reply_id}-{self.blocks}"


def drain(outbox: list[AgentEvent]) -> list[AgentEvent]:
    events = outbox[:]
    outbox.clear()
    return events
