"""The memory library's value types and the interface every memory backend offers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from hookmesh.retrieval import MetadataValue
from hookmesh.schema import Message

MemoryOrigin = Literal["fact", "extracted", "verbatim"]
"""How a memory was obtained: given as a fact, extracted by a model, or a user's turn as is."""

AddOutcome = Literal["created", "merged"]
"""What an add did with one fact: stored it, or merged it into a near-identical memory."""

ExtractionOutcome = Literal["none", "extracted", "no_model", "fallback"]
"""How an add treated messages: ``none`` (facts were given), ``extracted`` (the model's facts),
``no_model`` (user turns stored verbatim), ``fallback`` (the model's answer was invalid or the
call failed: user turns stored verbatim)."""

MemoryMetadata = Mapping[str, MetadataValue]
"""A memory's metadata: JSON scalars by key."""


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Who a memory belongs to, or which memories a call addresses.

    The user is an isolation boundary; agent and session narrow reads to the memories stored
    with them, and are recorded on the memories an add stores.
    """

    user_id: str
    """The user: 1-128 characters without control characters."""
    agent_id: str | None = None
    """The agent, or None (storing: no agent; reading: any agent)."""
    session_id: str | None = None
    """The session, or None (storing: no session; reading: any session)."""


@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory."""

    id: str
    """32 lowercase hexadecimal characters, ordered by creation time."""
    text: str
    """The fact."""
    scope: MemoryScope
    """Whose it is, and the agent and session it came from."""
    metadata: MemoryMetadata
    """The caller's metadata."""
    create_time: datetime
    """First stored (UTC)."""
    update_time: datetime
    """Last changed or merged into (UTC)."""
    source_message_ids: tuple[str, ...] = ()
    """Messages it was learned from (the most recent when merged many times)."""
    origin: MemoryOrigin = "fact"
    """How it was obtained."""


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One search result."""

    memory: Memory
    """The memory."""
    score: float
    """Reciprocal-rank-fusion score over the meaning and keyword rankings."""
    similarity: float | None
    """Cosine similarity to the query, when the meaning ranking found it."""
    rank: int
    """1-based position."""


@dataclass(frozen=True, slots=True)
class AddedMemory:
    """One fact an add stored."""

    memory: Memory
    """The memory as stored now."""
    outcome: AddOutcome
    """New, or merged into an existing memory (same id as before)."""


@dataclass(frozen=True, slots=True)
class AddResult:
    """What an add stored."""

    memories: list[AddedMemory]
    """One per stored fact, in order."""
    extraction: ExtractionOutcome = "none"
    """How messages were turned into facts."""


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of a listing."""

    memories: list[Memory]
    """Oldest first."""
    next_page_token: str = ""
    """Pass it back for the next page; empty on the last one."""


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """Request bounds a memory store enforces; a service may lower them."""

    max_text_chars: int = 8000
    """Longest fact; user turns stored verbatim are cut to this length."""
    max_facts: int = 64
    """Most facts one add may give (and most an extraction may yield)."""
    max_messages: int = 256
    """Most messages one add may give."""
    max_metadata_keys: int = 16
    """Most caller metadata keys on one memory."""
    max_query_chars: int = 4096
    """Longest search query."""
    max_page_size: int = 500
    """Largest list page."""
    max_top_k: int = 50
    """Most search hits."""


@runtime_checkable
class Memories(Protocol):
    """What a memory backend offers: `MemoryStore` in process, `MemoryClient` over gRPC.

    Errors are `hookmesh.errors.HookmeshError`s in process and
    `hookmesh.client.AgentClientError`s over gRPC; both carry the same stable reasons.
    """

    async def add(
        self,
        scope: MemoryScope,
        *,
        facts: Sequence[str] = (),
        messages: Sequence[Message] = (),
        metadata: MemoryMetadata | None = None,
    ) -> AddResult:
        """Store facts, or facts extracted from messages (exactly one of the two)."""
        ...

    async def search(
        self, query: str, scope: MemoryScope, *, top_k: int = 5, score_threshold: float = 0.0
    ) -> list[MemoryHit]:
        """The scope's memories that best match `query`, best first."""
        ...

    async def list(
        self, scope: MemoryScope, *, page_size: int = 50, page_token: str = ""
    ) -> MemoryPage:
        """One page of the scope's memories, oldest first."""
        ...

    async def get(self, user_id: str, memory_id: str) -> Memory:
        """One memory of `user_id`."""
        ...

    async def update(
        self,
        user_id: str,
        memory_id: str,
        *,
        text: str | None = None,
        metadata: MemoryMetadata | None = None,
    ) -> Memory:
        """Change a memory's text, metadata or both."""
        ...

    async def delete(self, user_id: str, memory_id: str) -> None:
        """Delete one memory."""
        ...

    async def delete_all(self, scope: MemoryScope) -> int:
        """Delete every memory of the scope; returns how many."""
        ...
