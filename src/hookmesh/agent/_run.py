"""Per-reply bookkeeping of the agent loop, and the ids it hands out."""

from __future__ import annotations

import asyncio
import os
from typing import Literal

from hookmesh.agent._checkpoint import Checkpoint
from hookmesh.agent._output import OutputSpec
from hookmesh.agent._state import OutputState
from hookmesh.schema import AgentEvent, Message, ReplyEndEvent, StructuredOutput

DEFAULT_MAX_ITERS = 20


def new_id() -> str:
    """A fresh random id (32 hex characters, 128 random bits)."""
    return os.urandom(16).hex()


class ReplyRun:
    """Per-reply bookkeeping, created once per reply and dropped when it ends."""

    __slots__ = (
        "begun",
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
        "output",
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
        self.output: ReplyOutput | None = None
        """The structured answer the reply asks for, if any."""
        self.begun = False
        """The core took the reply on (its inputs are in the context, reply_start is out)."""

    def block_id(self) -> str:
        self.blocks += 1
        return f"{self.reply_id}-{self.blocks}"


class ReplyOutput:
    """A running reply's structured output: the spec, the strategy chosen, the answers that
    failed so far, and the answer once one validated."""

    __slots__ = ("again", "failures", "result", "spec", "strategy")

    def __init__(self, spec: OutputSpec, strategy: Literal["native", "tool"], failures: int = 0):
        self.spec = spec
        self.strategy: Literal["native", "tool"] = strategy
        self.failures = failures
        self.result: StructuredOutput | None = None
        """The validated answer, once there is one."""
        self.again = False
        """The last answer failed and the model is asked again."""

    def state(self) -> OutputState:
        """What is saved with the reply."""
        return OutputState(key=self.spec.key, strategy=self.strategy, failures=self.failures)


def drain(outbox: list[AgentEvent]) -> list[AgentEvent]:
    events = outbox[:]
    outbox.clear()
    return events
