"""The memory service's configuration: one YAML file, overridable by HOOKMESH_MEMORY_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from hookmesh.memory import DEFAULT_DEDUP_THRESHOLD, DEFAULT_EXTRACTION_INSTRUCTION, MemoryLimits
from hookmesh.models import ModelConfig
from hookmesh.server import RetentionConfig, ServiceSettings, load_settings

_DEFAULT = MemoryLimits()


class MemoryServiceConfig(ServiceSettings):
    """Everything `hookmesh serve memory` reads (see docs/services/memory.md)."""

    model_config = SettingsConfigDict(
        env_prefix="HOOKMESH_MEMORY_", env_nested_delimiter="__", extra="forbid"
    )

    listen: str = "127.0.0.1:7004"
    """Address to serve on; port 0 picks a free one."""
    store: str = "sqlite:///hookmesh-data/memory.db"
    """``sqlite:///relative.db``, ``sqlite:////absolute.db`` or
    ``postgresql://user:password@host:port/database`` (may hold a secret: never logged)."""
    namespace: str = Field("memory", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    """PostgreSQL only: the schema holding the tables (apart from the retrieval service's)."""
    model: ModelConfig | None = None
    """The extraction model (``type: scripted`` or ``type: openai``, as in the agent config);
    unset: messages are stored as the user's turns, verbatim."""
    extraction_instruction: str = Field(DEFAULT_EXTRACTION_INSTRUCTION, min_length=1)
    """The extraction model's system instruction (it must ask for ``{"facts": [...]}``)."""
    extraction_timeout: float = Field(60.0, gt=0)
    """Seconds one extraction may take; then the turns are stored verbatim."""
    dedup_threshold: float = Field(DEFAULT_DEDUP_THRESHOLD, gt=0, le=2)
    """Cosine similarity at or above which a new fact merges into a memory of the same user
    and agent; above 1 never merges."""
    max_text_chars: int = Field(_DEFAULT.max_text_chars, ge=16, le=1_000_000)
    """Longest fact (verbatim turns are cut to it)."""
    max_facts: int = Field(_DEFAULT.max_facts, ge=1, le=1000)
    """Most facts per AddMemories (and per extraction)."""
    max_messages: int = Field(_DEFAULT.max_messages, ge=1, le=10_000)
    """Most messages per AddMemories."""
    max_metadata_keys: int = Field(_DEFAULT.max_metadata_keys, ge=0, le=24)
    """Most metadata keys per memory."""
    max_request_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest accepted request (gRPC refuses bigger ones with RESOURCE_EXHAUSTED)."""
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    """How long memories are kept after they last changed (added, updated or merged into;
    unset `ttl_seconds`: forever); swept at start and every `sweep_interval_seconds`."""
    grace_seconds: float = Field(5.0, ge=0)
    """Seconds in-flight calls get to finish on shutdown."""

    def limits(self) -> MemoryLimits:
        """The bounds the store enforces."""
        return MemoryLimits(
            max_text_chars=self.max_text_chars,
            max_facts=self.max_facts,
            max_messages=self.max_messages,
            max_metadata_keys=self.max_metadata_keys,
        )


def load_memory_config(path: str | Path | None = None, **overrides: Any) -> MemoryServiceConfig:
    """Read the YAML file at `path` (if any), then apply HOOKMESH_MEMORY_* variables and
    `overrides`.

    Raises:
        ValueError: The file is unreadable or invalid; the message names the bad keys.
    """
    return load_settings(MemoryServiceConfig, path, overrides)
