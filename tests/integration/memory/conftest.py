"""Fixtures for the memory suite: every store and service test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hookmesh.memory import MemoryStore, open_memory_store
from hookmesh.retrieval import Embedder
from tests.pg import postgres_url  # noqa: F401  (the session-wide PostgreSQL server)


@dataclass
class MemoryBackend:
    """Where a test's memories live; `open` opens another store on the same data."""

    name: str
    url: str
    namespace: str = "memory"
    opened: list[MemoryStore] = field(default_factory=list)

    async def open(self, **options: Any) -> MemoryStore:
        """A store on this backend (closed at the end of the test)."""
        store = await open_memory_store(self.url, namespace=self.namespace, **options)
        self.opened.append(store)
        return store

    def config(self, **overrides: Any) -> dict[str, Any]:
        """Memory service settings for this backend."""
        return {"store": self.url, "namespace": self.namespace, **overrides}


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[MemoryBackend]:
    """An empty SQLite file, or a fresh schema in the session's PostgreSQL server."""
    if request.param == "sqlite":
        found = MemoryBackend("sqlite", f"sqlite:///{tmp_path}/memory.db")
    else:
        url = request.getfixturevalue("postgres_url")
        found = MemoryBackend("postgresql", url, f"m_{uuid.uuid4().hex[:16]}")
    try:
        yield found
    finally:
        for store in found.opened:
            await store.close()
        if found.name == "postgresql":
            import psycopg

            async with await psycopg.AsyncConnection.connect(found.url, autocommit=True) as conn:
                await conn.execute(f"DROP SCHEMA IF EXISTS {found.namespace} CASCADE")


@pytest.fixture
async def store(backend: MemoryBackend) -> MemoryStore:
    """A store on the test's backend, no extraction model (closed by `backend`)."""
    return await backend.open()
