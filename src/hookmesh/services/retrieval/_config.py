"""The retrieval service's configuration: one YAML file, overridable by HOOKMESH_RETRIEVAL_*."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from hookmesh.retrieval import Limits
from hookmesh.server import RetentionConfig, ServiceSettings, load_settings
from hookmesh.services.retrieval._access import KnowledgeBaseGrant

_DEFAULT = Limits()


class RetrievalServiceConfig(ServiceSettings):
    """Everything `hookmesh serve retrieval` reads (see docs/services/retrieval.md)."""

    model_config = SettingsConfigDict(env_prefix="HOOKMESH_RETRIEVAL_", extra="forbid")

    listen: str = "127.0.0.1:7002"
    """Address to serve on; port 0 picks a free one."""
    store: str = "sqlite:///hookmesh-data/retrieval.db"
    """Knowledge store URL: ``sqlite:///relative.db``, ``sqlite:////absolute.db`` or
    ``postgresql://user:password@host:port/database`` (may hold a secret: never logged)."""
    namespace: str = Field("retrieval", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """PostgreSQL only: the schema holding the tables."""
    max_document_chars: int = Field(_DEFAULT.max_document_chars, ge=1, le=10_000_000)
    """Longest document text; longer ones are reported as ``DOCUMENT_TOO_LARGE``."""
    max_batch_documents: int = Field(_DEFAULT.max_batch_documents, ge=1, le=256)
    """Documents committed together (one store transaction, one durable commit)."""
    max_batch_chars: int = Field(_DEFAULT.max_batch_chars, ge=1, le=100_000_000)
    """Characters of text committed together; at least `max_document_chars`."""
    max_documents_per_ingest: int = Field(100_000, ge=1, le=10_000_000)
    """Most documents one Ingest stream may send (``TOO_MANY_DOCUMENTS`` beyond)."""
    max_query_chars: int = Field(_DEFAULT.max_query_chars, ge=1, le=100_000)
    """Longest search query."""
    grace_seconds: float = Field(5.0, ge=0)
    """Seconds in-flight calls get to finish on shutdown."""
    access: dict[str, KnowledgeBaseGrant] = Field(default_factory=dict)
    """Knowledge bases each principal may read and write (``{alice: {read: [handbook],
    write: []}}``, ``*`` for every base); empty: everyone may do everything. With grants,
    an unlisted principal may do nothing (docs/security.md)."""
    ownership: bool = False
    """A base belongs to the principal that created it: it alone may use it, others only
    with a grant in `access` (any caller may create bases of its own). `hookmesh up` turns
    it on with tokens (docs/security.md)."""
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    """How long documents are kept after their text or metadata last changed (an unchanged
    re-ingest does not renew them; unset `ttl_seconds`: forever); swept at start and every
    `sweep_interval_seconds`."""

    @model_validator(mode="after")
    def _batch_holds_a_document(self) -> RetrievalServiceConfig:
        if self.max_batch_chars < self.max_document_chars:
            raise ValueError("max_batch_chars must be at least max_document_chars")
        return self

    def limits(self) -> Limits:
        """The bounds the store enforces."""
        return Limits(
            max_document_chars=self.max_document_chars,
            max_batch_documents=self.max_batch_documents,
            max_batch_chars=self.max_batch_chars,
            max_query_chars=self.max_query_chars,
        )

    def max_message_bytes(self) -> int:
        """Largest gRPC message to accept: a largest document in UTF-8 plus room for metadata."""
        return max(4 * 1024 * 1024, 4 * self.max_document_chars + 1024 * 1024)


def load_retrieval_config(
    path: str | Path | None = None, **overrides: Any
) -> RetrievalServiceConfig:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_RETRIEVAL_* variables and
    `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    return load_settings(RetrievalServiceConfig, path, overrides)
